"""Known answers for refusals: an answer that asserts something is not an abstention, the
fact of a partial refusal is kept without the refusal, and refusing scores as a correctness
and relevance failure on an answerable case."""

from __future__ import annotations

import pytest

from raglab.graders.heuristic import decompose
from raglab.metrics import generation as gen
from tests.metrics.test_citation_markers import _grade

# -- partial refusals and short answers ------------------------------------------------

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


# -- refusing is a correctness and relevance failure ------------------------------------

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
