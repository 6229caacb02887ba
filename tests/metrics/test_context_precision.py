"""Known answers for context precision and where retrieval metrics apply: context precision
is the share of relevant passages, average precision has its own name, a graded variant
counts passages that support a claim, and retrieval metrics do not apply to unanswerable
cases."""

import pytest

from raglab.metrics.case import case_metrics, metric_names
from raglab.metrics.catalog import spec_of
from raglab.metrics.retrieval import context_metrics

# -- context precision is a share ------------------------------------------------------------

def test_context_precision_is_the_share_of_relevant_passages():
    m = context_metrics([[0], [], [], []])
    assert m["final.context_precision"] == 0.25
    assert m["final.context_average_precision"] == 1.0  # rank-aware, under its own name
    assert m["final.first_gold_rank"] == 1
    m = context_metrics([[], [0], [], [1]])
    assert m["final.context_precision"] == 0.5
    assert m["final.context_average_precision"] == pytest.approx((1 / 2 + 2 / 4) / 2)
    m = context_metrics([[], []])
    assert m["final.context_precision"] == 0.0 and m["final.context_average_precision"] == 0.0
    assert m["final.first_gold_rank"] is None


def test_more_irrelevant_context_lowers_context_precision():
    three = context_metrics([[0], [1], []])["final.context_precision"]
    five = context_metrics([[0], [1], [], [], []])["final.context_precision"]
    assert three == pytest.approx(2 / 3) and five == pytest.approx(2 / 5)


def _record(*, answerable=True, context_holds=None, verdicts=None, graded=True,
            answer="Exports run nightly. They are CSV files."):
    n_ctx = len(context_holds or [])
    return {
        "case_id": "c1", "tags": {},
        "gold": {"answerable": answerable, "grades": [1.0], "nuggets_vital": [],
                 "has_reference": False, "must_not_contain": []},
        "output": {"case_id": "c1", "answer": answer, "citations": [],
                   "candidates": [{"doc_id": "d", "text": f"p{i}"} for i in range(n_ctx)],
                   "context": [{"doc_id": "d", "text": f"p{i}"} for i in range(n_ctx)],
                   "latency_ms": {}, "usage": {}},
        "judgments": {"candidates": context_holds or [], "context": context_holds or [],
                      "leaks": [], "unknown_docs": []},
        "verdicts": verdicts or [], "graded": graded, "n_factual_sentences": 2, "error": None,
    }


def _claim(label, passage=..., i=0):
    v = {"family": "faithfulness", "kind": "claim", "grader": "heuristic", "version": "v",
         "prompt_hash": "h", "error": None, "item": f"claim {i}", "label": label,
         "evidence": "e", "index": i}
    if passage is not ...:
        v["passage"] = passage
    return v


DECOMP = {"family": "faithfulness", "kind": "decomposition", "grader": "heuristic",
          "version": "v", "prompt_hash": "h", "error": None, "claims": ["claim 0", "claim 1"]}


def _metrics(rec):
    return case_metrics(rec, [1, 3, 5], 5, 10)


def test_graded_context_precision_counts_passages_that_support_a_claim():
    holds = [[0], [], [], []]
    rec = _record(context_holds=holds, verdicts=[
        DECOMP, _claim("SUPPORTED", 2, 0), _claim("NOT_FOUND", 3, 1)])
    m = _metrics(rec)
    assert m["final.context_precision"] == 0.25
    assert m["final.context_precision_graded"] == 0.5  # passage 0 by label, 2 by a claim
    # a supported claim in a passage the labels already cover adds nothing
    rec = _record(context_holds=holds, verdicts=[DECOMP, _claim("SUPPORTED", 0, 0),
                                                 _claim("CONTRADICTED", 1, 1)])
    assert _metrics(rec)["final.context_precision_graded"] == 0.25


def test_graded_context_precision_does_not_apply_without_a_grader_or_passage_info():
    holds = [[0], [], [], []]
    assert _metrics(_record(context_holds=holds, graded=False))[
        "final.context_precision_graded"] is None
    # a supported claim whose verdict does not say which passage supported it: unknown
    rec = _record(context_holds=holds, verdicts=[DECOMP, _claim("SUPPORTED", i=0)])
    assert _metrics(rec)["final.context_precision_graded"] is None
    # an abstention has no claims: the labels alone decide
    abst = dict(DECOMP, claims=[])
    rec = _record(context_holds=holds, verdicts=[abst], answer="I don't know.")
    assert _metrics(rec)["final.context_precision_graded"] == 0.25


def test_context_metrics_are_declared_in_the_catalog():
    for name in ("final.context_precision", "final.context_average_precision",
                 "final.context_precision_graded"):
        spec = spec_of(name)
        assert spec is not None and spec.kind == "share" and spec.direction == "higher", name
        assert name in metric_names([1, 3, 5], 5, 10)
    assert "share" in spec_of("final.context_precision").meaning


# -- unanswerable cases -----------------------------------------------------------------------

def test_retrieval_metrics_do_not_apply_to_unanswerable_cases():
    rec = _record(answerable=False, context_holds=[[0], []], graded=False,
                  answer="I don't know.")
    rec["judgments"]["leaks"] = [{"severity": 1, "kind": "acl_leak", "stage": "context",
                                  "rank": 1, "doc_id": "d"}]
    m = _metrics(rec)
    retrieval = [n for n in m if (spec_of(n) is not None and spec_of(n).family == "retrieval"
                                  and n != "acl_leak_rate")]
    assert "final.evidence_recall" in retrieval and "final.context_precision" in retrieval
    assert all(m[n] is None for n in retrieval), {n: m[n] for n in retrieval if m[n] is not None}
    assert m["final.context_precision_graded"] is None
    assert m["acl_leak_rate"] == 1.0  # the leak check still sees the retrieved evidence
    # the same case marked answerable is scored
    rec["gold"]["answerable"] = True
    assert _metrics(rec)["final.evidence_recall"] == 1.0
