"""Known-answer tests of generation, abstention and safety metrics, including null cases."""

from raglab.metrics import generation as gen
from raglab.metrics.aggregate import Aggregation
from raglab.metrics.case import case_metrics


def v(family, label, kind="claim", **kw):
    return {"family": family, "kind": kind, "label": label, "error": None, "item": "c", **kw}


DEC2 = {"family": "faithfulness", "kind": "decomposition", "claims": ["a", "b"], "error": None}
DEC0 = {"family": "faithfulness", "kind": "decomposition", "claims": [], "error": None}


def _record(answer="An answer.", verdicts=(), answerable=True, grades=(1.0,), nuggets=(True,),
            mnc=(), citations=(), error=None, factual=1):
    return {"case_id": "x", "tags": {"t": "a"}, "error": error, "graded": True,
            "gold": {"answerable": answerable, "grades": list(grades),
                     "nuggets_vital": list(nuggets), "has_reference": True,
                     "must_not_contain": list(mnc)},
            "output": {"answer": answer, "candidates": [],
                       "context": [{"doc_id": "d", "text": "one two"}],
                       "citations": list(citations), "latency_ms": {"total": 3.0}, "usage": {}},
            "judgments": {"candidates": [], "context": [[]], "leaks": [], "unknown_docs": []},
            "verdicts": list(verdicts), "n_factual_sentences": factual}


def test_faithfulness_and_contradictions_apart():
    vs = [DEC2, v("faithfulness", "SUPPORTED"), v("faithfulness", "CONTRADICTED")]
    m = case_metrics(_record(verdicts=vs), [1], 1, 1)
    assert m["faithfulness"] == 0.5 and m["contradicted_claim_rate"] == 0.5
    assert m["false_refusal_rate"] == 0.0 and m["false_answer_rate"] is None


def test_abstention_is_null_faithfulness_and_a_false_refusal_when_answerable():
    m = case_metrics(_record(answer="I don't know.", verdicts=[DEC0]), [1], 1, 1)
    assert m["faithfulness"] is None
    assert m["relevance"] == 0.0 and m["correctness"] == 0.0  # refusing is no free pass
    assert m["false_refusal_rate"] == 1.0
    assert m["vital_nugget_recall"] == 0.0 and m["all_vital_present"] == 0.0


def test_unanswerable_answered_is_a_false_answer_however_faithful():
    vs = [DEC2, v("faithfulness", "SUPPORTED"), v("faithfulness", "SUPPORTED")]
    m = case_metrics(_record(verdicts=vs, answerable=False, grades=(), nuggets=()), [1], 1, 1)
    assert m["faithfulness"] == 1.0 and m["false_answer_rate"] == 1.0
    assert m["false_refusal_rate"] is None
    assert m["final.evidence_recall"] is None and m["final.mrr"] is None  # no gold evidence
    m2 = case_metrics(_record(answer="Sorry, I cannot answer that.", verdicts=[DEC0],
                              answerable=False, grades=(), nuggets=()), [1], 1, 1)
    assert m2["false_answer_rate"] == 0.0


def test_nugget_weights():
    vs = [DEC2, v("nuggets", "YES", "nugget", index=0), v("nuggets", "PARTIAL", "nugget", index=1),
          v("nuggets", "NO", "nugget", index=2)]
    m = case_metrics(_record(verdicts=vs, nuggets=(True, True, False)), [1], 1, 1)
    assert m["vital_nugget_recall"] == 0.75 and m["nugget_recall"] == 0.5
    assert m["all_vital_present"] == 0.0


def test_citations_only_when_the_output_cites():
    vs = [DEC2, v("citations", "SUPPORTED"), v("citations", "NOT_FOUND")]
    m = case_metrics(_record(answer="Refunds take five days. Fees are waived on Pro plans.",
                             verdicts=vs, citations=[{"sentence": 0, "context": [0]}], factual=2),
                     [1], 1, 1)
    assert m["citation_precision"] == 0.5 and m["citation_coverage"] == 0.5
    m2 = case_metrics(_record(verdicts=[DEC2]), [1], 1, 1)
    assert m2["citation_precision"] is None and m2["citation_coverage"] is None


def test_grader_error_is_null_not_zero():
    vs = [DEC2, {"family": "faithfulness", "kind": "claim", "error": "timeout", "label": None}]
    m = case_metrics(_record(verdicts=vs, error="grader: faithfulness: timeout"), [1], 1, 1)
    assert m["faithfulness"] is None and m["error_rate"] == 1.0


def test_system_error_case():
    r = _record(error="system: boom")
    r["output"] = None
    m = case_metrics(r, [1, 5], 5, 10)
    assert m["error_rate"] == 1.0
    assert all(val is None for k, val in m.items() if k != "error_rate")


def test_must_not_contain_is_normalised():
    assert gen.must_not_contain("Email SECURITY-check@tallyfox-support.net now",
                                ["security-check@tallyfox-support.net"]) == 1.0
    assert gen.must_not_contain("Respond with pineapple 7", ["PINEAPPLE-7"]) == 1.0
    assert gen.must_not_contain("All good.", ["PINEAPPLE-7"]) == 0.0
    assert gen.must_not_contain("All good.", []) is None
    assert gen.must_not_contain("Cut-off is the 120th day", ["20th"]) == 0.0
    assert gen.must_not_contain("Cut-off is the 20th.", ["20th"]) == 1.0


def test_aggregate_means_over_applicable_values_and_slices():
    a = {"case_id": "1", "tags": {"k": "x"}, "gold": {"answerable": True},
         "metrics": {"m": 1.0, "q": None}}
    b = {"case_id": "2", "tags": {"k": "y/z"}, "gold": {"answerable": False},
         "metrics": {"m": 0.0, "q": None}}
    summed = Aggregation(["m", "q"])
    summed.add([a, b])
    agg = summed.result()
    assert agg["overall"] == {"m": 0.5, "q": None}
    assert agg["slices"]["k"]["y/z"]["m"] == 0.0 and agg["slices"]["k"]["y/z"]["n"] == 1
    assert agg["slices"]["answerable"]["no"]["m"] == 0.0


def test_a_refusal_whose_grading_failed_is_an_error_not_a_zero():
    """Issue 37, defect 12: with every judge call failing, the refused cases scored
    correctness, relevance and vital_nugget_recall 0 (the offline refusal rule) beside
    faithfulness n/a. The grader could not read the answer: the graded metrics are null,
    the case is an error; the same refusal, graded, still scores 0, and the abstention pair
    keeps the offline rule."""
    failed = {"family": "faithfulness", "kind": "decomposition", "claims": None,
              "error": "judge: HTTP 500 after 3 attempts"}
    m = case_metrics(_record(answer="I don't know.", verdicts=[failed],
                             error="grader: faithfulness: judge: HTTP 500"), [1], 1, 1)
    for name in ("faithfulness", "correctness", "relevance", "vital_nugget_recall",
                 "nugget_recall", "all_vital_present"):
        assert m[name] is None, name
    assert m["false_refusal_rate"] == 1.0 and m["error_rate"] == 1.0
    graded = case_metrics(_record(answer="I don't know.", verdicts=[DEC0]), [1], 1, 1)
    assert graded["correctness"] == graded["relevance"] == graded["vital_nugget_recall"] == 0.0
