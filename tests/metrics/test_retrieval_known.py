"""Known-answer tests of retrieval metrics and evidence judging."""

import math

import pytest

from raglab.metrics.judging import GoldItem, judge_hits
from raglab.metrics.retrieval import context_metrics, ranked_list_metrics

DOC = "0123456789" * 10  # 100 characters


def g(doc, s, e, grade=1.0, span=False, text="x"):
    return GoldItem(doc, s, e, grade, span, text)


def J(*a, **k):
    return [list(h) for h in judge_hits(*a, **k)]


def test_quote_contained_and_straddling_chunks():
    gold = [g("d", 40, 60)]
    hits = [{"doc_id": "d", "start": 0, "end": 45},    # holds 5 of 20 chars: no
            {"doc_id": "d", "start": 45, "end": 90},   # holds 15 of 20: yes (>= 50%)
            {"doc_id": "d", "start": 30, "end": 70},   # holds all: yes
            {"doc_id": "e", "start": 40, "end": 60}]   # other document: no
    assert J(hits, gold, {"d": DOC}) == [[], [0], [0], []]
    # straddle_min_fraction=1.0: the whole quote, here from the union of the first two hits
    assert J(hits, gold, {"d": DOC}, straddle_min_fraction=1.0) == [[], [0], [0], []]
    assert J(hits[1:], gold, {"d": DOC}, straddle_min_fraction=1.0) == [[], [0], []]


def test_span_evidence_needs_any_overlap():
    gold = [g("d", 40, 60, span=True)]
    hits = [{"doc_id": "d", "start": 0, "end": 41}, {"doc_id": "d", "start": 0, "end": 40}]
    assert J(hits, gold, {"d": DOC}) == [[0], []]


def test_hits_without_offsets_are_placed_by_text_or_matched_by_quote():
    doc = "Refunds take five business days. Exports run nightly."
    gold = [GoldItem("d", 0, 32, 1.0, False, "Refunds take five business days")]
    hits = [{"doc_id": "d", "text": ""},  # whole document
            {"doc_id": "d", "text": "Exports run nightly."},  # placed, elsewhere
            {"doc_id": "d", "text": "REFUNDS take five business-days (rewritten)"}]  # not placeable
    assert J(hits, gold, {"d": doc}) == [[0], [], [0]]


def test_metrics_known_values():
    # 3 evidence items with grades 2, 1, 1; ranking: miss, holds item0, holds item1+item2, miss
    holds = [[], [0], [1, 2], []]
    m = ranked_list_metrics(holds, [2.0, 1.0, 1.0], [1, 3, 10], "s")
    assert m["s.mrr"] == 0.5
    assert m["s.evidence_recall@1"] == 0.0 and m["s.evidence_recall@3"] == 1.0
    assert m["s.all_evidence@3"] == 1.0 and m["s.all_evidence@1"] == 0.0
    assert m["s.hit_rate@1"] == 0.0 and m["s.hit_rate@3"] == 1.0
    assert m["s.precision@3"] == pytest.approx(2 / 3) and m["s.precision@10"] == pytest.approx(0.2)
    assert m["s.precision"] == 0.5  # whole list: 2 relevant of 4 returned
    # nDCG@3: hit at rank 2 credited grade 2, rank 3 credited one item of grade 1
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert m["s.ndcg@3"] == pytest.approx(dcg / idcg)
    assert all(m[k] <= 1.0 for k in m)


def test_one_hit_is_credited_with_one_item_so_ndcg_never_exceeds_one():
    holds = [[0, 1, 2], [0, 1, 2], [0, 1, 2]]  # every hit holds everything
    m = ranked_list_metrics(holds, [1.0, 3.0, 2.0], [3], "s")
    dcg = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert m["s.ndcg@3"] == pytest.approx(1.0) == pytest.approx(dcg / dcg)


def test_empty_ranking_fails_rather_than_nan():
    m = ranked_list_metrics([], [1.0], [1, 5], "s")
    assert m["s.mrr"] == 0.0 and m["s.ndcg@5"] == 0.0 and m["s.precision"] == 0.0
    assert m["s.evidence_recall@5"] == 0.0


def test_context_metrics():
    assert context_metrics([[], [0], [], [1]]) == {
        "final.context_precision": 0.5,
        "final.context_average_precision": pytest.approx((1 / 2 + 2 / 4) / 2),
        "final.first_gold_rank": 2}
    assert context_metrics([[], []]) == {"final.context_precision": 0.0,
                                         "final.context_average_precision": 0.0,
                                         "final.first_gold_rank": None}
