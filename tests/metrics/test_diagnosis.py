"""Failure attribution: one hand-built record per cause, the combinations, the counts."""

import pytest

from raglab.graders.spec import diagnosis_version
from raglab.metrics.aggregate import diagnosis_counts
from raglab.metrics.diagnosis import CAUSES, DiagnosisCfg, diagnose
from raglab.tracking.keys import metrics_from_summary, slice_metric_key

CFG = DiagnosisCfg()  # min_evidence_recall 1, min_faithfulness 0.8, max_contradicted 0,
#                       min_correctness 0.5, min_vital_nugget_recall 1

GOOD_ANSWERABLE = {
    "candidate.evidence_recall": 1.0, "final.evidence_recall": 1.0, "acl_leak_rate": 0.0,
    "faithfulness": 1.0, "contradicted_claim_rate": 0.0, "correctness": 1.0,
    "vital_nugget_recall": 1.0, "false_refusal_rate": 0.0, "false_answer_rate": None,
    "must_not_contain_rate": None, "error_rate": 0.0,
}
GOOD_UNANSWERABLE = {
    "candidate.evidence_recall": None, "final.evidence_recall": None, "acl_leak_rate": 0.0,
    "faithfulness": None, "contradicted_claim_rate": None, "correctness": None,
    "vital_nugget_recall": None, "false_refusal_rate": None, "false_answer_rate": 0.0,
    "must_not_contain_rate": None, "error_rate": 0.0,
}


def rec(base=GOOD_ANSWERABLE, error=None, tags=None, answerable=True, **metrics):
    m = dict(base)
    m.update({k.replace("__", "."): v for k, v in metrics.items()})
    return {"case_id": "c", "tags": tags or {}, "gold": {"answerable": answerable},
            "metrics": m, "error": error}


def causes(record, cfg=CFG):
    d = diagnose(record, cfg)
    return None if d is None else (d["primary"], d["causes"])


def test_passing_cases_have_no_diagnosis():
    assert diagnose(rec(), CFG) is None
    assert diagnose(rec(GOOD_UNANSWERABLE, answerable=False), CFG) is None


@pytest.mark.parametrize("metrics,expected", [
    ({"candidate__evidence_recall": 0.5, "final__evidence_recall": 0.5}, "retrieval"),
    ({"final__evidence_recall": 0.0}, "reranking_or_k"),
    ({"false_refusal_rate": 1.0, "faithfulness": None, "contradicted_claim_rate": None,
      "correctness": 0.0, "vital_nugget_recall": 0.0}, "false_refusal"),
    ({"faithfulness": 0.5}, "generation"),
    ({"contradicted_claim_rate": 0.25, "faithfulness": 0.75}, "generation"),
    ({"contradicted_claim_rate": 0.1, "faithfulness": 0.9}, "generation"),
    ({"must_not_contain_rate": 1.0}, "generation"),
    ({"correctness": 0.25}, "stale_or_conflicting_corpus"),
    ({"vital_nugget_recall": 0.5}, "incomplete_answer"),
    ({"acl_leak_rate": 1.0}, "access_control"),
])
def test_one_cause_each(metrics, expected):
    assert causes(rec(**metrics)) == (expected, [expected])


def test_hallucinated_answer():
    r = rec(GOOD_UNANSWERABLE, answerable=False, false_answer_rate=1.0, faithfulness=1.0,
            contradicted_claim_rate=0.0)
    assert causes(r) == ("hallucinated_answer", ["hallucinated_answer"])


def test_error_alone_and_with_what_still_applies():
    # the system produced nothing: every metric but error_rate is None
    nothing = {k: None for k in GOOD_ANSWERABLE} | {"error_rate": 1.0}
    assert causes(rec(nothing, error="system: timed out")) == ("error", ["error"])
    # a grader error nulls its family; the retrieval and leak checks still apply
    r = rec(error="grader: faithfulness: overloaded", faithfulness=None,
            contradicted_claim_rate=None, candidate__evidence_recall=0.0,
            final__evidence_recall=0.0, acl_leak_rate=1.0, error_rate=1.0)
    assert causes(r) == ("error", ["error", "retrieval", "access_control"])


def test_access_control_is_always_listed_but_never_hides_another_cause():
    r = rec(candidate__evidence_recall=0.0, final__evidence_recall=0.0, acl_leak_rate=1.0)
    assert diagnose(r, CFG) == {"primary": "retrieval", "causes": ["retrieval", "access_control"]}
    r = rec(GOOD_UNANSWERABLE, answerable=False, false_answer_rate=1.0, acl_leak_rate=1.0)
    assert causes(r) == ("hallucinated_answer", ["hallucinated_answer", "access_control"])
    r = rec(faithfulness=0.2, acl_leak_rate=1.0)
    assert causes(r) == ("generation", ["generation", "access_control"])


def test_stage_order_and_what_an_earlier_stage_explains():
    # evidence lost in both stages: some never retrieved, some dropped by the reranker
    r = rec(candidate__evidence_recall=0.5, final__evidence_recall=0.0)
    assert causes(r) == ("retrieval", ["retrieval", "reranking_or_k"])
    # faithful but wrong with the evidence missing from the context: retrieval explains it
    r = rec(candidate__evidence_recall=0.5, final__evidence_recall=0.5, correctness=0.0)
    assert causes(r) == ("retrieval", ["retrieval"])
    r = rec(final__evidence_recall=0.5, vital_nugget_recall=0.0)
    assert causes(r) == ("reranking_or_k", ["reranking_or_k"])
    # unfaithful and wrong: generation, not the corpus
    assert causes(rec(faithfulness=0.5, correctness=0.0)) == ("generation", ["generation"])
    # a refusal on an answerable case whose evidence was never retrieved
    r = rec(candidate__evidence_recall=0.0, final__evidence_recall=0.0, false_refusal_rate=1.0,
            faithfulness=None, contradicted_claim_rate=None, correctness=0.0,
            vital_nugget_recall=0.0)
    assert causes(r) == ("retrieval", ["retrieval", "false_refusal"])
    # no gold evidence (recall does not apply): a faithful wrong answer points at the corpus
    r = rec(candidate__evidence_recall=None, final__evidence_recall=None, correctness=0.0)
    assert causes(r) == ("stale_or_conflicting_corpus", ["stale_or_conflicting_corpus"])
    # faithfulness unknown (no verdicts): no claim about the corpus
    assert diagnose(rec(faithfulness=None, contradicted_claim_rate=None, correctness=0.0),
                    CFG) is None


def test_thresholds_are_boundaries():
    assert diagnose(rec(faithfulness=0.8), CFG) is None  # at the minimum passes
    assert causes(rec(faithfulness=0.79)) == ("generation", ["generation"])
    assert diagnose(rec(correctness=0.5), CFG) is None
    loose = DiagnosisCfg(min_evidence_recall=0.5, max_contradicted=0.2,
                         min_vital_nugget_recall=0.5)
    assert diagnose(rec(candidate__evidence_recall=0.5, final__evidence_recall=0.5,
                        contradicted_claim_rate=0.2, vital_nugget_recall=0.5), loose) is None
    assert causes(rec(candidate__evidence_recall=0.4, final__evidence_recall=0.4),
                  loose) == ("retrieval", ["retrieval"])


def test_causes_follow_the_documented_order():
    assert CAUSES == ("error", "retrieval", "reranking_or_k", "false_refusal",
                      "hallucinated_answer", "generation", "incomplete_answer",
                      "stale_or_conflicting_corpus", "access_control")
    r = rec(error="grader: x", candidate__evidence_recall=0.5, final__evidence_recall=0.0,
            faithfulness=0.1, acl_leak_rate=1.0, must_not_contain_rate=1.0)
    assert causes(r) == ("error", ["error", "retrieval", "reranking_or_k", "generation",
                                   "access_control"])


def test_version_changes_with_thresholds_and_code():
    from raglab.metrics import versions

    v = diagnosis_version(CFG)
    assert v == diagnosis_version(DiagnosisCfg())
    assert v != diagnosis_version(DiagnosisCfg(min_faithfulness=0.9))
    old = versions.CODE_VERSIONS["diagnosis"]
    try:
        versions.CODE_VERSIONS["diagnosis"] = old + 1
        assert diagnosis_version(CFG) != v
    finally:
        versions.CODE_VERSIONS["diagnosis"] = old


def test_counts_overall_per_slice_and_in_mlflow_keys():
    records = [
        rec(tags={"intent": "billing"}),
        rec(tags={"intent": "billing"}, candidate__evidence_recall=0.0,
            final__evidence_recall=0.0, acl_leak_rate=1.0),
        rec(tags={"intent": "a/b"}, faithfulness=0.1),
        rec(GOOD_UNANSWERABLE, answerable=False, tags={"intent": "a/b"}, false_answer_rate=1.0),
    ]
    for r in records:
        r["diagnosis"] = diagnose(r, CFG)
    counts = diagnosis_counts(records)
    assert counts["failed"] == 3
    assert counts["overall"] == dict.fromkeys(CAUSES, 0) | {
        "retrieval": 1, "access_control": 1, "generation": 1, "hallucinated_answer": 1}
    assert counts["primary"] == dict.fromkeys(CAUSES, 0) | {
        "retrieval": 1, "generation": 1, "hallucinated_answer": 1}
    billing = counts["slices"]["intent"]["billing"]
    assert (billing["retrieval"], billing["access_control"], billing["generation"]) == (1, 1, 0)
    assert counts["slices"]["answerable"]["no"]["hallucinated_answer"] == 1
    assert counts["slices"]["answerable"]["yes"]["hallucinated_answer"] == 0
    assert diagnosis_counts([rec()])["failed"] == 0  # records without a diagnosis: passed

    logged = metrics_from_summary({"diagnoses": counts})
    assert logged["diagnosis.retrieval"] == 1 and logged["diagnosis.error"] == 0
    assert logged["diagnosis.primary.generation"] == 1 and logged["diagnosis.failed"] == 3
    assert logged[slice_metric_key("intent", "a/b", "diagnosis.generation")] == 1
    assert logged["slice/intent/a_sb/diagnosis.hallucinated_answer"] == 1


def test_run_report_has_a_failure_attribution_section(tmp_path):
    import json

    from raglab.report.run_report import write_run_report

    records = [rec(tags={"intent": "billing"}, candidate__evidence_recall=0.0,
                   final__evidence_recall=0.0, acl_leak_rate=1.0), rec(tags={"intent": "x"})]
    for r in records:
        r["diagnosis"] = diagnose(r, CFG)
    (tmp_path / "metrics.json").write_text(json.dumps(
        {"overall": {}, "slices": {}, "n_cases": 2, "diagnoses": diagnosis_counts(records)}))
    write_run_report(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "## Failure attribution" in md and "Cases with a diagnosis: 1." in md
    assert "| retrieval | 1 | 1 |" in md and "| access_control | 1 | 0 |" in md
    assert "| intent | billing | 1 | 1 |" in md and "| intent | x |" not in md
    assert "generation" not in md.split("## Failure attribution")[1]  # zero causes left out


def test_every_run_record_has_a_diagnosis_and_metrics_json_counts(tmp_path, tiny):
    import json

    from tests.conftest import run_cli

    corpus, cases = tiny
    out = tmp_path / "run"
    proc = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}", "tracking=none",
                   "system.enforce_acl=false", "diagnosis.min_faithfulness=0.9",
                   f"hydra.run.dir={out}", f"cache_dir={tmp_path / 'c'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = (out / "records.jsonl").read_text().splitlines()
    recs = {r["case_id"]: r for r in map(json.loads, lines)}
    assert all("diagnosis" in r for r in recs.values())
    # the unanswerable t-3 is answered from the staff-only document it may not see
    assert recs["t-3"]["diagnosis"] == {"primary": "hallucinated_answer",
                                        "causes": ["hallucinated_answer", "access_control"]}
    m = json.loads((out / "metrics.json").read_text())
    assert m["diagnoses"]["overall"]["access_control"] == 1
    assert m["diagnoses"]["slices"]["answerable"]["no"]["hallucinated_answer"] == 1
    expected = diagnosis_version(DiagnosisCfg(min_faithfulness=0.9))
    assert m["metric_versions"]["diagnosis"] == expected
    assert "failed cases: " in proc.stdout
    assert "## Failure attribution" in (out / "report.md").read_text()


def test_faithful_but_incomplete_is_an_incomplete_answer_not_the_corpus():
    """The guidance: faithful, evidence in context, vital facts missing -> a cautious model
    or a truncated context; faithful, complete, evidence in context, yet wrong against the
    reference -> check the corpus for stale or conflicting documents."""
    # faithful, all evidence in the context, one of two vital facts missing, wrong too
    r = rec(faithfulness=1.0, vital_nugget_recall=0.5, correctness=0.2)
    assert causes(r) == ("incomplete_answer", ["incomplete_answer"])
    # a PARTIAL vital nugget (0.5 credit) under the default bound of 1: incomplete
    assert causes(rec(vital_nugget_recall=0.75)) == ("incomplete_answer", ["incomplete_answer"])
    # faithful, complete (every vital nugget present), evidence in context, yet wrong
    r = rec(faithfulness=1.0, vital_nugget_recall=1.0, correctness=0.25)
    assert causes(r) == ("stale_or_conflicting_corpus", ["stale_or_conflicting_corpus"])
    # no vital nuggets in the reference (recall does not apply): complete by definition
    r = rec(vital_nugget_recall=None, correctness=0.0)
    assert causes(r) == ("stale_or_conflicting_corpus", ["stale_or_conflicting_corpus"])
    # evidence that did not reach the context explains a missing fact: not incomplete_answer
    r = rec(candidate__evidence_recall=1.0, final__evidence_recall=0.5, vital_nugget_recall=0.0)
    assert causes(r) == ("reranking_or_k", ["reranking_or_k"])
    # unfaithful and incomplete: generation only
    assert causes(rec(faithfulness=0.5, vital_nugget_recall=0.0)) == \
        ("generation", ["generation"])


def test_a_wrong_answer_missing_a_non_vital_fact_is_incomplete_not_the_corpus():
    """Demo case acl-03 under a LangChain pipeline: faithful, the evidence in the context,
    every vital nugget present but a non-vital fact missing, wrong against the reference.
    Diagnosis 2 sent it to the corpus; it is an incomplete answer (diagnosis 3)."""
    r = rec(faithfulness=1.0, vital_nugget_recall=1.0, nugget_recall=0.5, correctness=0.0)
    assert causes(r) == ("incomplete_answer", ["incomplete_answer"])
    # a PARTIAL non-vital nugget is missing too (as a PARTIAL vital one is)
    r = rec(vital_nugget_recall=1.0, nugget_recall=0.75, correctness=0.25)
    assert causes(r) == ("incomplete_answer", ["incomplete_answer"])
    # no vital nugget in the reference, a non-vital one missing, wrong: incomplete
    r = rec(vital_nugget_recall=None, nugget_recall=0.0, correctness=0.0)
    assert causes(r) == ("incomplete_answer", ["incomplete_answer"])
    # every nugget present, wrong: only now the corpus
    r = rec(vital_nugget_recall=1.0, nugget_recall=1.0, correctness=0.0)
    assert causes(r) == ("stale_or_conflicting_corpus", ["stale_or_conflicting_corpus"])
    # a missing non-vital fact in a correct answer is no failure (vital ones gate alone)
    assert diagnose(rec(vital_nugget_recall=1.0, nugget_recall=0.5, correctness=1.0),
                    CFG) is None
    # unfaithful, wrong and incomplete: generation only
    r = rec(faithfulness=0.5, vital_nugget_recall=1.0, nugget_recall=0.5, correctness=0.0)
    assert causes(r) == ("generation", ["generation"])


def test_the_diagnosis_version_changed_with_the_new_cause():
    from raglab.metrics.versions import CODE_VERSIONS

    # 2: incomplete_answer; 3: a wrong answer missing any nugget is incomplete_answer
    assert CODE_VERSIONS["diagnosis"] == 3
