"""One definition of a failed case (raglab.metrics.diagnosis.failed): the run's "failed
cases: N" and the cases ``raglab cases from-run`` drafts, with one reason per cause."""

from __future__ import annotations

import pytest

from raglab.cases.drafts import failure_reasons
from raglab.metrics.diagnosis import CAUSES, DiagnosisCfg, diagnose, failed


def _rec(**metrics):
    return {"case_id": "c", "error": None, "metrics": metrics, "verdicts": []}


@pytest.mark.parametrize("metrics,cause", [
    ({"candidate.evidence_recall": 0.5, "final.evidence_recall": 0.5}, "retrieval"),
    ({"candidate.evidence_recall": 1.0, "final.evidence_recall": 0.5}, "reranking_or_k"),
    ({"false_refusal_rate": 1.0}, "false_refusal"),
    ({"false_answer_rate": 1.0}, "hallucinated_answer"),
    # unsupported by diagnosis's bound (0.8), above the 0.5 drafts used to have of their own
    ({"faithfulness": 0.7, "contradicted_claim_rate": 0.0}, "generation"),
    ({"must_not_contain_rate": 1.0}, "generation"),
    ({"faithfulness": 1.0, "contradicted_claim_rate": 0.0, "correctness": 0.2},
     "stale_or_conflicting_corpus"),
    ({"faithfulness": 1.0, "contradicted_claim_rate": 0.0, "vital_nugget_recall": 0.5},
     "incomplete_answer"),
    ({"faithfulness": 1.0, "contradicted_claim_rate": 0.0, "vital_nugget_recall": 1.0,
      "nugget_recall": 0.5, "correctness": 0.0}, "incomplete_answer"),
    ({"acl_leak_rate": 1.0}, "access_control"),
])
def test_a_case_fails_for_drafts_exactly_when_it_has_a_diagnosis(metrics, cause):
    rec = _rec(**metrics)
    rec["diagnosis"] = diagnose(rec, DiagnosisCfg())
    assert rec["diagnosis"]["causes"] == [cause] and failed(rec)
    reasons = failure_reasons(rec)
    assert len(reasons) >= 1 and all(r for r in reasons)


def test_a_passing_case_has_no_reason_and_the_runs_diagnosis_decides():
    rec = _rec(faithfulness=0.7, contradicted_claim_rate=0.0)
    assert failed(rec) and failure_reasons(rec)  # no diagnosis written: the default bounds
    rec["diagnosis"] = None  # the run's own thresholds passed it
    assert not failed(rec) and failure_reasons(rec) == []
    lenient = DiagnosisCfg(min_faithfulness=0.5)
    assert not failed(_rec(faithfulness=0.7, contradicted_claim_rate=0.0), lenient)


def test_errors_say_what_failed():
    rec = {**_rec(), "error": "system: timeout\nafter 30 s"}
    assert failure_reasons(rec) == ["error: system: timeout after 30 s"]
    assert diagnose(rec, DiagnosisCfg())["causes"] == [CAUSES[0]]


def test_an_incomplete_answer_names_the_missing_nuggets_vital_or_not():
    rec = _rec(faithfulness=1.0, contradicted_claim_rate=0.0, vital_nugget_recall=1.0,
               nugget_recall=0.5, correctness=0.0)
    rec["verdicts"] = [
        {"family": "nuggets", "item": "MFA is required", "label": "YES", "vital": True},
        {"family": "nuggets", "item": "codes expire in 30 s", "label": "NO", "vital": False}]
    reasons = failure_reasons(rec)
    assert reasons[0].startswith("faithful, evidence in the context, but facts missing "
                                 "(vital nugget recall 1.00, nugget recall 0.50)")
    assert reasons[1:] == ["other nugget missing: codes expire in 30 s"]
