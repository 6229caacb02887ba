"""Units of the reference pipeline without the CLI: the lexical reranker and the context
token budget."""

from __future__ import annotations

import pytest

from raglab.systems.reference import context_within_budget
from raglab.systems.rerankers import LexicalRerankCfg, LexicalReranker, NoRerankCfg, NoReranker

Q = "How long do refunds take to reach the card?"
CANDS = [(0, 10.0, "Exports run nightly at 02:00 UTC."),
         (1, 5.0, "Refunds reach the original card within 5 business days."),
         (2, 5.0, "The refund fee is waived.")]


def test_no_reranker_keeps_the_retrieval_order():
    assert NoReranker(NoRerankCfg(name="none")).rerank(Q, CANDS) == CANDS


def test_lexical_reranker_blends_score_and_term_coverage():
    out = LexicalReranker(LexicalRerankCfg(name="lexical", weight=0.5)).rerank(Q, CANDS)
    # the question's content terms: long, refund, take, reach, card
    by_pos = {p: s for p, s, _ in out}
    assert by_pos[0] == pytest.approx(0.5 * 10 / 10 + 0.5 * 0 / 5)   # no term
    assert by_pos[1] == pytest.approx(0.5 * 5 / 10 + 0.5 * 3 / 5)    # refund, reach, card
    assert by_pos[2] == pytest.approx(0.5 * 5 / 10 + 0.5 * 1 / 5)    # refund
    assert [p for p, _, _ in out] == [1, 0, 2]


def test_lexical_weight_one_is_the_retrieval_score_and_zero_is_coverage():
    only_score = LexicalReranker(LexicalRerankCfg(name="lexical", weight=1.0)).rerank(Q, CANDS)
    assert [p for p, _, _ in only_score] == [0, 1, 2]  # ties keep the retrieval order
    only_cov = LexicalReranker(LexicalRerankCfg(name="lexical", weight=0.0)).rerank(Q, CANDS)
    assert [p for p, _, _ in only_cov][-1] == 0 and only_cov[-1][1] == 0.0


def test_lexical_reranker_of_nothing_is_nothing():
    assert LexicalReranker(LexicalRerankCfg(name="lexical")).rerank(Q, []) == []


def _c(pos, n_tokens):
    return (pos, 1.0, " ".join(["w"] * n_tokens))


def test_context_stops_at_k():
    got = context_within_budget([_c(i, 1) for i in range(10)], k=3, budget=100)
    assert [p for p, _, _ in got] == [0, 1, 2]


def test_context_budget_skips_what_does_not_fit_and_keeps_later_shorter_ones():
    got = context_within_budget([_c(0, 6), _c(1, 8), _c(2, 3), _c(3, 2)], k=5, budget=10)
    assert [p for p, _, _ in got] == [0, 2]  # 6, then 8 > 4 left, 3 fits, 2 > 1 left


def test_context_budget_counts_whitespace_tokens():
    got = context_within_budget([(0, 1.0, "a  b\n c"), (1, 1.0, "d e")], k=5, budget=4)
    assert [p for p, _, _ in got] == [0]
