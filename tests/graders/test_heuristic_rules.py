"""Each rule of the offline grader, pinned by a test that fails if the rule is replaced by a
constant (README "Graders": what the heuristic grader does, and its limits)."""

from __future__ import annotations

import asyncio

import pytest

from raglab.graders.heuristic import (HeuristicGrader, HeuristicGraderCfg, context_windows,
                                      decompose, judge_nugget, judge_relevance, verify_claim)

PASSAGE = ("Refunds are paid back to the original card within 5 business days. "
           "Partial refunds are allowed for Pro plans. Exports run nightly at 02:00 UTC.")
W = context_windows([PASSAGE])


def _label(claim: str, threshold: float = 72) -> str:
    return verify_claim(claim, W, threshold)[0]


# ---- decomposition --------------------------------------------------------------------------

def test_each_sentence_is_a_claim_and_citation_markers_go():
    assert decompose("Refunds take 5 days [1]. Exports run nightly [2].", 12, True) == \
        ["Refunds take 5 days.", "Exports run nightly."]


def test_hedge_prefix_is_dropped_only_when_asked():
    assert decompose("I think refunds take 5 days.", 12, True) == ["refunds take 5 days."]
    assert decompose("I think refunds take 5 days.", 12, False) == ["I think refunds take 5 days."]


@pytest.mark.parametrize("sentence", ["Hope this helps with refunds.", "Thanks for asking about refunds.",
                                      "Let me know about other refund questions."])
def test_non_claim_sentences_are_dropped(sentence):
    assert decompose(f"Refunds take 5 days. {sentence}", 12, True) == ["Refunds take 5 days."]
    assert len(decompose(f"Refunds take 5 days. {sentence}", 12, False)) == 2


def test_clauses_split_at_semicolons():
    assert decompose("Refunds take 5 days; exports run nightly.", 12, True) == \
        ["Refunds take 5 days", "exports run nightly."]


def test_refusal_sentences_and_one_word_sentences_are_no_claims():
    assert decompose("I cannot find that in the documents.", 12, True) == []
    assert decompose("Yes. Refunds take 5 days.", 12, True) == ["Refunds take 5 days."]


def test_max_claims_caps_the_list():
    answer = " ".join(f"Refund rule number {i} applies." for i in range(5))
    assert len(decompose(answer, 3, True)) == 3


# ---- verification ---------------------------------------------------------------------------

def test_a_covered_claim_is_supported_with_its_sentence():
    label, sent = verify_claim("Refunds are paid back to the original card within 5 business days.",
                               W, 72)
    assert label == "SUPPORTED" and sent.startswith("Refunds are paid back")


def test_an_uncovered_claim_is_not_found():
    assert _label("The office cafeteria serves lunch at noon.") == "NOT_FOUND"


def test_a_different_number_contradicts():
    assert _label("Refunds are paid back to the original card within 9 business days.") == \
        "CONTRADICTED"


def test_a_negation_the_context_lacks_contradicts():
    assert _label("Refunds are not paid back to the original card within 5 business days.") == \
        "CONTRADICTED"


def test_a_different_entity_contradicts():
    w = context_windows(["Partial refunds are allowed for Pro plans."])
    assert verify_claim("Partial refunds are allowed for Pro plans.", w, 72)[0] == "SUPPORTED"
    assert verify_claim("Partial refunds are allowed for Starter plans.", w, 72)[0] == \
        "CONTRADICTED"


def test_partial_coverage_with_a_number_disagreement_still_contradicts():
    # covered below the threshold but above 0.6 x threshold, and the number disagrees
    claim = "Refunds reach the card within 9 business days after approval by finance."
    assert _label(claim) == "CONTRADICTED"
    assert _label(claim.replace("9", "5")) == "NOT_FOUND"


def test_the_support_threshold_decides():
    claim = "Refunds are paid to the card within 5 days of a request by phone."
    assert _label(claim, threshold=40) == "SUPPORTED"
    assert _label(claim, threshold=95) == "NOT_FOUND"


# ---- nuggets --------------------------------------------------------------------------------

def test_nugget_thresholds():
    answer = "Refunds are paid back to the original card."
    assert judge_nugget("refunds paid back to the card", answer, 75, 50)[0] == "YES"
    assert judge_nugget("refunds paid back to the bank account", answer, 75, 50)[0] == "PARTIAL"
    assert judge_nugget("exports run nightly", answer, 75, 50)[0] == "NO"


def test_a_missing_number_caps_a_nugget_at_partial():
    assert judge_nugget("refunds within 5 business days", "Refunds within 5 business days.",
                        75, 50)[0] == "YES"
    assert judge_nugget("refunds within 5 business days", "Refunds within business days.",
                        75, 50)[0] == "PARTIAL"


# ---- relevance rubric -----------------------------------------------------------------------

def test_relevance_rubric():
    q = "How long do refunds take to reach the card?"
    assert judge_relevance(q, "Refunds take 5 days to reach the card.")[0] == "ANSWERS_AS_ASKED"
    assert judge_relevance(q, "Exports run nightly at 02:00 UTC.")[0] == "DIFFERENT_QUESTION"
    assert judge_relevance(q, "Refunds reach the card in 5 days. Exports run nightly. "
                              "Invoices are monthly. The office opens at nine.")[0] == \
        "ADDS_UNNEEDED"


def test_the_grader_uses_its_config():
    cfg = HeuristicGraderCfg(name="heuristic", support_threshold=40, nugget_yes=100,
                             nugget_partial=10)
    g = HeuristicGrader(cfg)
    claim = "Refunds are paid to the card within 5 days of a request by phone."
    assert asyncio.run(g.verify([claim], [PASSAGE], "faithfulness"))[0][0] == "SUPPORTED"
    assert asyncio.run(g.nuggets("q", "Refunds are paid back.",
                                 ["refunds paid back to the card"]))[0][0] == "PARTIAL"
