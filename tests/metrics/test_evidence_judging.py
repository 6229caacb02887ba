"""Known answers of evidence judging (raglab/metrics/judging.py): a quote split over chunks is
credited on their union (each character once, from the same document), found once, at the
chunk that completes it; "half a quote" of an odd length
means more than half its characters; a rewritten passage that cannot be placed in its
document holds only the quotes it really contains."""

import math

import pytest

from raglab.metrics.judging import GoldItem, judge_hits
from raglab.metrics.retrieval import context_metrics, ranked_list_metrics

DOC = "0123456789" * 10  # 100 characters


def J(*a, **k):
    return [list(h) for h in judge_hits(*a, **k)]


def test_a_quote_split_over_two_chunks_is_found_once_and_later_fragments_hold_nothing():
    quote = [GoldItem("d", 20, 80, 1.0, False, "x")]  # 60 characters: found at 30
    hits = [{"doc_id": "d", "start": 0, "end": 40},    # 20 of them
            {"doc_id": "d", "start": 40, "end": 60},   # 20 more: 40 >= 30, found here
            {"doc_id": "d", "start": 25, "end": 40},   # later fragments of the found quote,
            {"doc_id": "d", "start": 40, "end": 58}]   # 15 + 18 = 33 >= 30 again: still nothing
    judged = J(hits, quote, {"d": DOC})
    assert judged == [[], [0], [], []]
    m = ranked_list_metrics(judged, [1.0], [1, 2, 4], "s")
    assert m["s.evidence_recall@1"] == 0.0 and m["s.evidence_recall@2"] == 1.0
    assert m["s.evidence_recall"] == 1.0 and m["s.mrr"] == 0.5
    assert m["s.precision@4"] == 0.25 and m["s.precision"] == 0.25  # one relevant hit of four
    assert context_metrics(judged)["final.context_precision"] == 0.25


def test_a_later_fragment_big_enough_on_its_own_still_holds_the_quote():
    quote = [GoldItem("d", 20, 80, 1.0, False, "x")]
    hits = [{"doc_id": "d", "start": 0, "end": 40}, {"doc_id": "d", "start": 40, "end": 60},
            {"doc_id": "d", "start": 30, "end": 70}]  # 40 of 60 characters by itself
    assert J(hits, quote, {"d": DOC}) == [[], [0], [0]]


@pytest.mark.parametrize("end, held", [(45, False), (46, True)])
def test_half_of_an_odd_length_quote_rounds_up(end, held):
    # an 11-character quote at the default fraction 0.5 needs 6 characters (5.5 rounded up)
    quote = [GoldItem("d", 40, 51, 1.0, False, "x")]
    assert J([{"doc_id": "d", "start": 40, "end": end}], quote, {"d": DOC}) == \
        [[0] if held else []]
    # the same from the union of two fragments
    two = [{"doc_id": "d", "start": 30, "end": 43}, {"doc_id": "d", "start": 43, "end": end}]
    assert J(two, quote, {"d": DOC}) == [[], [0] if held else []]


@pytest.mark.parametrize("fraction, covered, held", [
    (0.5, 5, True),      # 10 characters, 0.5: exactly 5 are enough
    (1 / 3, 3, False),   # 10 characters, a third: 3.33 rounds up to 4
    (1 / 3, 4, True),
    (1.0, 9, False),
])
def test_the_needed_characters_are_the_fraction_rounded_up(fraction, covered, held):
    quote = [GoldItem("d", 10, 20, 1.0, False, "x")]
    hit = {"doc_id": "d", "start": 10, "end": 10 + covered}
    assert J([hit], quote, {"d": DOC}, straddle_min_fraction=fraction) == [[0] if held else []]


REFUNDS_DOC = "Refunds take five business days. Exports run nightly."
REFUNDS = GoldItem("d", 0, 32, 1.0, False, "Refunds take five business days")


@pytest.mark.parametrize("text", [
    "Invoices are kept for seven years in the archive.",   # unrelated
    "Exports run every night at two (rewritten).",          # the document's other sentence
    "Refunds are never paid in cash.",                       # shares a word, not the quote
])
def test_a_rewritten_passage_without_the_quote_holds_nothing(text):
    hits = [{"doc_id": "d", "text": text}]  # not found in the document: matched by text
    assert J(hits, [REFUNDS], {"d": REFUNDS_DOC}) == [[]]


def test_a_rewritten_passage_holds_the_quote_at_the_fuzzy_threshold_only():
    near = [{"doc_id": "d", "text": "Note: refunds take five busines days, as a rule."}]  # typo
    assert J(near, [REFUNDS], {"d": REFUNDS_DOC}) == [[0]]
    assert J(near, [REFUNDS], {"d": REFUNDS_DOC}, fuzzy_threshold=99.0) == [[]]
    # above 100 no fuzzy match at all: only the normalised quote inside the text counts
    assert J(near, [REFUNDS], {"d": REFUNDS_DOC}, fuzzy_threshold=101.0) == [[]]


# -- a quote split over several hits ---------------------------------------------------------

QUOTE_60 = [GoldItem("d", 20, 80, 1.0, False, "x")]
THIRDS = [{"doc_id": "d", "start": 0, "end": 40},    # 20 of the 60 quote characters
          {"doc_id": "d", "start": 40, "end": 60},   # 20 more: 40 of 60 so far
          {"doc_id": "d", "start": 60, "end": 100}]  # the last 20


def test_quote_spread_over_three_hits_is_found_on_their_union():
    judged = J(THIRDS, QUOTE_60, {"d": DOC})
    # the second hit brings the union to 40/60 >= 0.5: the item is found there, once
    assert judged == [[], [0], []]
    m = ranked_list_metrics(judged, [1.0], [1, 2, 3], "s")
    assert m["s.evidence_recall@1"] == 0.0
    assert m["s.evidence_recall@2"] == m["s.evidence_recall@3"] == m["s.evidence_recall"] == 1.0
    assert m["s.all_evidence@3"] == 1.0 and m["s.hit_rate@1"] == 0.0 and m["s.hit_rate@2"] == 1.0
    assert m["s.mrr"] == 0.5
    assert m["s.ndcg@3"] == pytest.approx(1 / math.log2(3))  # the gain credited at rank 2


def test_union_needs_the_whole_quote_when_the_fraction_is_one():
    judged = J(THIRDS, QUOTE_60, {"d": DOC}, straddle_min_fraction=1.0)
    assert judged == [[], [], [0]]
    # two hits of 5 and 15 characters of a 20-character quote: found at the second
    hits = [{"doc_id": "d", "start": 0, "end": 45}, {"doc_id": "d", "start": 45, "end": 90}]
    assert J(hits, [GoldItem("d", 40, 60, 1.0, False, "x")], {"d": DOC},
             straddle_min_fraction=1.0) == [[], [0]]


def test_union_counts_each_character_once_and_only_from_the_same_document():
    hits = [{"doc_id": "d", "start": 20, "end": 40}, {"doc_id": "d", "start": 25, "end": 45},
            {"doc_id": "e", "start": 40, "end": 80}, {"doc_id": "d", "start": 20, "end": 40}]
    # union of the d-hits is 20..45: 25 of 60 characters, under half
    assert J(hits, QUOTE_60, {"d": DOC, "e": DOC}) == [[], [], [], []]


def test_union_is_per_ranked_list_and_whole_documents_are_unchanged():
    gold = [GoldItem("d", 20, 80, 2.0, False, "x"), GoldItem("d", 85, 95, 1.0, False, "y")]
    hits = [{"doc_id": "e", "text": ""}, {"doc_id": "d", "text": ""}, {"doc_id": "d", "text": ""}]
    # a whole-document hit holds both items; the second copy is credited with the other one
    assert J(hits, gold, {"d": DOC, "e": DOC}) == [[], [0, 1], [0, 1]]
