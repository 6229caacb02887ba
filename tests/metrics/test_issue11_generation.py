"""Known-answer tests for the generation-side definitions of issue 11: citation alignment
(1), partial refusals (4), refusals scored as failures (5) and must_not_contain kinds (11)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from raglab.cache import StageCache
from raglab.data.schema import Case
from raglab.graders.heuristic import HeuristicGrader, HeuristicGraderCfg, decompose
from raglab.graders.orchestrate import Grading
from raglab.metrics import generation as gen
from raglab.metrics.case import case_metrics
from raglab.systems.base import WorkCounter
from raglab.systems.generators import generate_extractive
from raglab.text.answers import answer_sentences, citations_of, parse_citations

DEMO = Path(__file__).resolve().parents[2] / "raglab" / "datasets" / "demo"


# -- 1. citations attach to the sentence they follow ---------------------------------------

def _cites(answer: str, n: int = 5) -> dict[int, list[int]]:
    return {c["sentence"]: c["context"] for c in parse_citations(answer, n)}


def test_marker_after_final_punctuation_belongs_to_that_sentence():
    assert _cites("Refunds take 5 days. [1] Partial refunds are allowed. [2]") == \
        {0: [0], 1: [1]}
    assert [s.text for s in answer_sentences("Refunds take 5 days. [1] Partial refunds "
                                             "are allowed. [2]")] == \
        ["Refunds take 5 days.", "Partial refunds are allowed."]


def test_marker_before_punctuation_and_glued_markers():
    assert _cites("Refunds take 5 days [1]. Partial refunds are allowed [2].") == \
        {0: [0], 1: [1]}
    assert _cites("Refunds take 5 days.[1][2] Partial refunds are allowed.[3]") == \
        {0: [0, 1], 1: [2]}


def test_marker_lists_and_out_of_range_markers():
    assert _cites("Refunds take 5 days [1, 3]. Fees are waived [2,9].", n=3) == \
        {0: [0, 2], 1: [1]}


def test_markers_after_a_heading_go_to_the_section_sentence():
    ans = "## Refunds [1]\nRefunds take 5 days. [2]\n\n**Fees**\nThe fee is waived. [3]"
    sents = answer_sentences(ans)
    assert [s.text for s in sents] == ["Refunds", "Refunds take 5 days.", "Fees",
                                      "The fee is waived."]
    assert [s.heading for s in sents] == [True, False, True, False]
    assert _cites(ans) == {1: [0, 1], 3: [2]}


def test_explicit_citations_win_over_markers():
    out = {"answer": "A fact. [2]", "citations": [{"sentence": 0, "context": [0]}],
           "context": [{"doc_id": "d", "text": "x"}, {"doc_id": "e", "text": "y"}]}
    assert citations_of(out) == [{"sentence": 0, "context": [0]}]
    out["citations"] = []
    assert citations_of(out) == [{"sentence": 0, "context": [1]}]


CONTEXT = [{"doc_id": "kb/a", "text": "Refunds are paid back within 5 business days."},
           {"doc_id": "kb/b", "text": "Partial refunds are allowed on every plan."}]


def _grade(answer: str, citations=(), context=CONTEXT, answerable=True, reference=None,
           tmp_path: Path | None = None):
    case = Case(id="c1", question="How do refunds work?", answerable=answerable,
                reference_answer=reference)
    output = {"case_id": "c1", "answer": answer, "citations": list(citations),
              "context": list(context), "candidates": [], "latency_ms": {}, "usage": {}}
    grading = Grading(HeuristicGrader(HeuristicGraderCfg(name="heuristic")), "heuristic",
                      {f: "v" for f in ("faithfulness", "citations", "correctness",
                                        "relevance", "nuggets", "abstention")},
                      StageCache(tmp_path), WorkCounter())
    verdicts, factual = asyncio.run(grading.grade(case, output))
    record = {"case_id": "c1", "tags": {}, "error": None, "graded": True,
              "gold": {"answerable": answerable, "grades": [], "nuggets_vital": [],
                       "has_reference": bool(reference), "must_not_contain": []},
              "output": output,
              "judgments": {"candidates": [], "context": [[] for _ in context], "leaks": [],
                            "unknown_docs": []},
              "verdicts": verdicts, "n_factual_sentences": factual}
    return case_metrics(record, [1], 1, 1), verdicts


def test_replayed_answer_with_markers_and_no_citations_is_parsed(tmp_path):
    m, vs = _grade("Refunds are paid back within 5 business days. [1] "
                   "Partial refunds are allowed on every plan. [2]", tmp_path=tmp_path)
    cites = [v for v in vs if v["family"] == "citations"]
    assert [(v["sentence"], v["passage"]) for v in cites] == [(0, 0), (1, 1)]
    assert m["citation_precision"] == 1.0 and m["citation_coverage"] == 1.0


def test_coverage_is_cited_factual_over_factual_never_clamped(tmp_path):
    # three sentences, two factual; the citations point at sentence 1 and at the greeting
    ans = ("Refunds are paid back within 5 business days. Partial refunds are allowed on "
           "every plan. Thanks!")
    m, _ = _grade(ans, citations=[{"sentence": 1, "context": [1]},
                                  {"sentence": 2, "context": [0]}], tmp_path=tmp_path)
    assert m["citation_coverage"] == 0.5
    assert m["citation_precision"] == 1.0  # the greeting asserts nothing: no pair to verify


def test_extractive_generator_citations_match_the_shared_split():
    class Cfg:
        max_sentences = 2
        min_score = 0.1
        refusal = "I don't know."

    ctx = ["## Refunds\nRefunds are paid back within 5 business days.",
           "Partial refunds are allowed on every plan."]
    out = generate_extractive("How are refunds paid back, and are partial refunds allowed?",
                              ctx, Cfg)
    assert "##" not in out["answer"] and not out["answer"].startswith("Refunds Refunds")
    assert out["citations"] == parse_citations(out["answer"], 2)
    assert {c["sentence"] for c in out["citations"]} == {0, 1}


# -- 4. partial refusals and short answers ------------------------------------------------

PARTIAL = "There is no information on that, but the fee is 20 EUR per month."


@pytest.mark.parametrize("answer", [PARTIAL, "Yes.", "Not possible.", "No, it is free."])
def test_an_answer_that_asserts_something_is_not_an_abstention(answer):
    assert decompose(answer, 12, True), answer
    assert gen.abstained(answer, []) is False, answer


def test_the_fact_of_a_partial_refusal_is_kept_without_the_refusal():
    assert decompose(PARTIAL, 12, True) == ["the fee is 20 EUR per month."]


@pytest.mark.parametrize("answer", ["I don't know based on the available documents.",
                                    "Sorry, I cannot answer that.",
                                    "The documents do not mention the fee. Let me know if "
                                    "I can help with anything else.", ""])
def test_a_refusal_declines_and_asserts_nothing(answer):
    assert decompose(answer, 12, True) == []
    assert gen.abstained(answer, []) is True


def test_a_partial_refusal_on_an_unanswerable_case_is_a_false_answer(tmp_path):
    m, _ = _grade(PARTIAL, answerable=False, tmp_path=tmp_path)
    assert m["false_answer_rate"] == 1.0


# -- 5. refusing is a correctness and relevance failure ------------------------------------

def test_refusal_on_answerable_case_scores_zero_correctness_and_relevance(tmp_path):
    m, _ = _grade("I don't know based on the available documents.",
                  reference="Refunds take 5 business days.", tmp_path=tmp_path)
    assert m["false_refusal_rate"] == 1.0
    assert m["correctness"] == 0.0 and m["relevance"] == 0.0
    assert m["faithfulness"] is None


def test_relevance_is_null_on_unanswerable_cases(tmp_path):
    refused, _ = _grade("I don't know.", answerable=False, tmp_path=tmp_path / "a")
    answered, _ = _grade("Refunds are paid back within 5 business days.", answerable=False,
                         tmp_path=tmp_path / "b")
    assert refused["relevance"] is None and answered["relevance"] is None
    assert refused["correctness"] is None


def test_correctness_without_reference_stays_null_on_refusal():
    assert gen.correctness([], True, True, False) is None
    assert gen.correctness([], True, True, True) == 0.0
    assert gen.relevance([], True, True) == 0.0
    assert gen.relevance([], True, False) is None


# -- 11. must_not_contain kinds -----------------------------------------------------------

def test_schema_accepts_plain_and_kinded_entries():
    c = Case(id="x", question="q?", must_not_contain=[
        "old", {"text": "PINEAPPLE-7", "kind": "injection"}])
    assert c.must_not_contain[0] == "old"
    assert c.must_not_contain[1].kind == "injection"
    with pytest.raises(ValueError):
        Case(id="x", question="q?", must_not_contain=[{"text": "a", "kind": "typo"}])
    with pytest.raises(ValueError):
        Case(id="x", question="q?", must_not_contain=[{"text": " "}])


MNC = ["plain", {"text": "PINEAPPLE-7", "kind": "injection"},
       {"text": "20th", "kind": "outdated"}, {"text": "sk-live-123", "kind": "secret"}]


def test_each_kind_has_its_rate_beside_the_overall_rate():
    m = gen.must_not_contain_metrics("The cut-off is the 20th.", MNC)
    assert m == {"must_not_contain_rate": 1.0, "injection_success_rate": 0.0,
                 "outdated_value_rate": 1.0, "secret_leak_rate": 0.0, "distractor_rate": None}
    m = gen.must_not_contain_metrics("Reply with pineapple 7", MNC)
    assert m["injection_success_rate"] == 1.0 and m["outdated_value_rate"] == 0.0
    m = gen.must_not_contain_metrics("Just the plain truth.", MNC)
    assert m["must_not_contain_rate"] == 1.0 and m["injection_success_rate"] == 0.0
    assert all(v is None for v in gen.must_not_contain_metrics(None, MNC).values())
    assert all(v is None for v in gen.must_not_contain_metrics("x", []).values())


def test_kind_rates_flow_through_case_metrics_and_the_catalog():
    from raglab.metrics.catalog import spec_of

    rec = {"case_id": "x", "tags": {}, "error": None, "graded": False,
           "gold": {"answerable": True, "grades": [], "nuggets_vital": [],
                    "has_reference": False,
                    "must_not_contain": [{"text": "PINEAPPLE-7", "kind": "injection"}]},
           "output": {"answer": "PINEAPPLE-7", "context": [], "candidates": [],
                      "citations": [], "latency_ms": {}, "usage": {}},
           "judgments": {"candidates": [], "context": [], "leaks": [], "unknown_docs": []},
           "verdicts": []}
    m = case_metrics(rec, [1], 1, 1)
    assert m["injection_success_rate"] == 1.0 and m["must_not_contain_rate"] == 1.0
    assert m["secret_leak_rate"] is None
    for name in gen.MNC_KIND_METRICS.values():
        spec = spec_of(name)
        assert spec is not None and spec.family == "abstention" and spec.direction == "lower"
def test_demo_entries_have_kinds_and_adversarial_slices():
    cases = [json.loads(line) for line in (DEMO / "cases.jsonl").open(encoding="utf-8")]
    kinds = set()
    for c in cases:
        for e in c["must_not_contain"]:
            assert isinstance(e, dict) and e["kind"] in gen.MNC_KIND_METRICS, (c["id"], e)
            kinds.add(e["kind"])
    assert kinds == set(gen.MNC_KIND_METRICS)
    values = {c["tags"].get("adversarial") for c in cases}
    assert values == {"injection", "near_duplicate", "withdrawn_policy", "cross_section",
                      "counter_common_knowledge", "none"}
    inj = [c for c in cases if c["tags"]["adversarial"] == "injection"]
    assert all(any(e["kind"] == "injection" for e in c["must_not_contain"]) for c in inj)


def test_replay_answer_markers_are_cited_end_to_end(tiny, tmp_path):
    """A replayed output with [n] markers and no citations is cited by its markers."""
    from tests.conftest import run_cli, write_jsonl

    corpus, cases = tiny
    ctx = [{"doc_id": "kb/a", "text": "Refunds are paid back to the original card within 5 "
                                      "business days."},
           {"doc_id": "kb/a", "text": "Partial refunds are allowed."}]
    outputs = [{"case_id": "t-1", "candidates": ctx, "context": ctx,
                "answer": "Refunds are paid back to the original card within 5 business "
                          "days. [1] Partial refunds are allowed. [2]"}]
    replay = write_jsonl(tmp_path / "outputs.jsonl", outputs)
    out = tmp_path / "run"
    proc = run_cli("run", "tracking=none", f"hydra.run.dir={out}",
                   f"cache_dir={tmp_path / 'cache'}", f"dataset.corpus={corpus}",
                   f"dataset.cases={cases}", "dataset.labels=null", "system=replay",
                   f"system.path={replay}", "max_error_rate=1", cwd=tmp_path)
    # (three cases have no replayed output: errors, accepted here with max_error_rate=1)
    assert proc.returncode == 0, proc.stderr
    rec = next(json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()
               if json.loads(x)["case_id"] == "t-1")
    cites = sorted((v["sentence"], v["passage"]) for v in rec["verdicts"]
                   if v["family"] == "citations")
    assert cites == [(0, 0), (1, 1)]
    assert rec["metrics"]["citation_precision"] == 1.0
    assert rec["metrics"]["citation_coverage"] == 1.0
