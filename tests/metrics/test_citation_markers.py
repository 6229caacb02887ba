"""Known answers for citation alignment: an [n] marker cites the sentence it follows (after
its final punctuation, before it, glued or in lists, after a heading), explicit citations win
over markers, and a replayed answer's markers are parsed into citations."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from raglab.cache import StageCache
from raglab.data.schema import Case
from raglab.graders.heuristic import HeuristicGrader, HeuristicGraderCfg
from raglab.graders.orchestrate import Grading
from raglab.metrics.case import case_metrics
from raglab.systems.base import WorkCounter
from raglab.systems.generators import generate_extractive
from raglab.text.answers import answer_sentences, citations_of, parse_citations

# -- citations attach to the sentence they follow ---------------------------------------

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
