"""Each rule of the offline grader, pinned by a test that fails if the rule is replaced by a
constant (docs/graders.md, "The offline grader": what it does, and its limits)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from raglab.graders.heuristic import (
    HeuristicGrader,
    HeuristicGraderCfg,
    context_windows,
    decompose,
    judge_nugget,
    judge_relevance,
    verify_claim,
)

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


@pytest.mark.parametrize("sentence", ["Hope this helps with refunds.",
                                      "Thanks for asking about refunds.",
                                      "Let me know about other refund questions."])
def test_non_claim_sentences_are_dropped(sentence):
    assert decompose(f"Refunds take 5 days. {sentence}", 12, True) == ["Refunds take 5 days."]
    assert len(decompose(f"Refunds take 5 days. {sentence}", 12, False)) == 2


def test_clauses_split_at_semicolons():
    assert decompose("Refunds take 5 days; exports run nightly.", 12, True) == \
        ["Refunds take 5 days", "exports run nightly."]


def test_refusal_sentences_are_no_claims_but_a_short_direct_answer_is():
    assert decompose("I cannot find that in the documents.", 12, True) == []
    # "Yes." answers the question (it is no abstention)
    assert decompose("Yes. Refunds take 5 days.", 12, True) == ["Yes.", "Refunds take 5 days."]
    assert decompose("Ok. Refunds take 5 days.", 12, True) == ["Refunds take 5 days."]


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


# ==== rules pinned at their boundaries (each fails on the former rule or on a constant) ====

PROMPTS = Path(__file__).resolve().parents[2] / "raglab" / "graders" / "prompts"


def verify(claim: str, *passages: str, threshold: float = 72) -> str:
    """The label of ``claim`` against ``passages``."""
    return verify_claim(claim, context_windows(list(passages)), threshold)[0]


# -- decomposition ---------------------------------------------------------------------------

def test_decomposition_drops_greetings_hedges_and_refusal_clauses_only():
    assert decompose("Hi! I think refunds take 5 business days. Hope this helps!", 12, True) \
        == ["refunds take 5 business days."]
    assert decompose("Refunds take 5 days; fees are waived.", 12, True) == \
        ["Refunds take 5 days", "fees are waived."]
    assert decompose("I cannot find the fee, however refunds take 5 days.", 12, True) == \
        ["refunds take 5 days."]
    assert decompose("I cannot find the fee.", 12, True) == []


# -- verification ---------------------------------------------------------------------

def test_support_needs_coverage():
    ctx = "Refunds are paid back to the original card within 5 business days."
    assert verify("Refunds are paid back to the original card within 5 business days.",
                  ctx) == "SUPPORTED"
    assert verify("Exports run nightly at 02:00 from the Reports page.", ctx) == "NOT_FOUND"


def test_a_different_number_contradicts_and_the_same_one_supports():
    ctx = "Refunds are paid back within 5 business days."
    assert verify("Refunds are paid back within 10 business days.", ctx) == "CONTRADICTED"
    assert verify("Refunds are paid back within 5 business days.", ctx) == "SUPPORTED"


def test_opposite_polarity_contradicts():
    ctx = "SMS codes are not supported for two-factor sign-in."
    assert verify("SMS codes are supported for two-factor sign-in.", ctx) == "CONTRADICTED"
    assert verify("SMS codes are not supported for two-factor sign-in.", ctx) == "SUPPORTED"


def test_a_different_named_entity_contradicts():
    ctx = "Custom payment terms can be typed in on the Growth plan."
    assert verify("Custom payment terms can be typed in on the Starter plan.", ctx) == \
        "CONTRADICTED"
    assert verify("Custom payment terms can be typed in on the Growth plan.", ctx) == \
        "SUPPORTED"


@pytest.mark.parametrize("claim, passage", [
    ("Tallyfox Care Tallyfox Care costs £4 per device per month.",
     "# Tallyfox Care\nTallyfox Care costs £4 per device per month."),
    ("Cash drawer does not open The CD-410 cash drawer opens through the printer, so if "
     "the printer is offline the drawer will not open either.",
     "## Cash drawer does not open\nThe CD-410 cash drawer opens through the printer, so if "
     "the printer is offline the drawer will not open either."),
])
def test_a_heading_glued_to_its_sentence_is_not_a_contradiction(claim, passage):
    assert verify(claim, passage) == "SUPPORTED"
    # without the heading in the context the entity check still holds
    assert verify(claim, passage.split("\n", 1)[1]) == "SUPPORTED"


# -- nuggets --------------------------------------------------------------------------

def nugget(text: str, answer: str) -> str:
    return judge_nugget(text, answer, 75, 50)[0]


def test_nugget_term_coverage_levels():
    n = "Refunds go back to the original card within 5 business days"
    assert nugget(n, "Refunds go back to the original card within 5 business days. [1]") == "YES"
    assert nugget(n, "Refunds go back to the original card.") == "PARTIAL"
    assert nugget(n, "Exports run nightly.") == "NO"


def test_a_missing_number_caps_a_nugget_at_partial_and_a_different_one_denies_it():
    n = "Invoices are due 10 days after the invoice date"
    assert nugget(n, "Invoices are due 10 days after the invoice date.") == "YES"
    assert nugget(n, "Invoices are due some days after the invoice date.") == "PARTIAL"
    assert nugget(n, "Invoices are due 30 days after the invoice date.") == "NO"


def test_nugget_polarity_must_agree():
    n = "The switch takes effect immediately, not at the next renewal"
    assert nugget(n, "The switch takes effect at the next renewal.") != "YES"
    assert nugget(n, "The switch takes effect at the next renewal.") == "NO"
    assert nugget(n, "The switch takes effect immediately, not at the next renewal.") == "YES"
    assert nugget("Mid-term switches are not prorated",
                  "Switching mid-term is prorated.") == "NO"
    assert nugget("Mid-term switches are not prorated",
                  "Mid-term switches are not prorated. [1]") == "YES"
    # a negation in another clause of the answer's sentence does not flip the nugget
    assert nugget("The drawer opens through the printer",
                  "The drawer opens through the printer, so if the printer is offline the "
                  "drawer will not open either.") == "YES"
    assert nugget("Refunds themselves are free",
                  "Refunds themselves are free, but the processing fee is not returned.") == "YES"


# -- relevance ------------------------------------------------------------------------

def rel(q: str, a: str) -> str:
    return judge_relevance(q, a)[0]


def test_relevance_answers_as_asked():
    assert rel("How much does Ledger Growth cost per month in euro?",
               "Ledger Growth costs €25 per month. [1]") == "ANSWERS_AS_ASKED"
    assert rel("Does Ledger support SMS codes for 2FA?",
               "No, Ledger does not support SMS codes for 2FA.") == "ANSWERS_AS_ASKED"


def test_relevance_off_topic_answer_is_a_different_question():
    assert rel("How do I reset my password?",
               "Invoices are due 10 days after the invoice date.") == "DIFFERENT_QUESTION"


def test_relevance_missing_asked_slot_is_a_different_question():
    q = "How many days until an invoice is due by default in Ledger?"
    assert rel(q, "By default Ledger invoices are due after the default payment term.") == \
        "DIFFERENT_QUESTION"
    assert rel(q, "By default Ledger invoices are due 10 days after the invoice date.") == \
        "ANSWERS_AS_ASKED"
    assert rel("When does the legacy contacts CSV import stop working?",
               "The legacy contacts CSV import will stop working on 30 June 2026.") == \
        "ANSWERS_AS_ASKED"
    assert rel("When does the legacy contacts CSV import stop working?",
               "The legacy contacts CSV import is being replaced.") == "DIFFERENT_QUESTION"


def test_relevance_missing_key_terms_is_a_different_question():
    q = "Can I give one customer Net 21 terms on the Starter plan?"
    assert rel(q, "On the Pro plan each customer can be given custom terms.") == \
        "DIFFERENT_QUESTION"
    assert rel(q, "Net 21 terms are not available to a customer on the Starter plan.") == \
        "ANSWERS_AS_ASKED"
    q = "Why do my invoices on Net 30 terms show the wrong due date?"
    assert rel(q, "On Net 10 terms invoices show a due date 10 days after the invoice "
                  "date.") == "DIFFERENT_QUESTION"
    assert rel(q, "On Net 30 terms invoices show a due date 30 days after the invoice "
                  "date.") == "ANSWERS_AS_ASKED"


def test_relevance_mostly_off_question_sentences_add_unneeded_material():
    q = "Does Ledger support SMS codes for 2FA?"
    a = ("Ledger does not support SMS codes for 2FA. [1] Invoices get the prefix INV- and a "
         "running number. [2] Recurring invoices are a Growth feature. [3]")
    assert rel(q, a) == "ADDS_UNNEEDED"


# -- the Claude nugget prompt ---------------------------------------------------------

def test_claude_nugget_prompt_gives_partial_for_implied_or_incomplete_nuggets():
    text = (PROMPTS / "nuggets.txt").read_text(encoding="utf-8")
    assert "merely implies" not in text
    partial = next(line for line in text.splitlines() if line.startswith("- PARTIAL"))
    assert "implie" in partial and "incomplete" in partial


def test_a_partial_refusal_gets_correctness_credit_for_the_fact_it_states():
    """Issue: "There is no information on the discount, but the Pro plan costs 20 EUR per
    month." scored correctness 0 against "The Pro plan costs 20 EUR per month." (the
    refusal clause's negation counted against the claim); the same fact after a ';' or in
    its own sentence scored 1. Real contradictions stay CONTRADICTED."""
    import asyncio

    from raglab.graders.heuristic import HeuristicGrader, HeuristicGraderCfg

    g = HeuristicGrader(HeuristicGraderCfg(name="heuristic"))
    ref = ["The Pro plan costs 20 EUR per month."]

    def label(answer: str) -> str:
        return asyncio.run(g.verify(ref, [answer], "correctness"))[0][0]

    assert label("There is no information on the discount, but the Pro plan costs 20 EUR "
                 "per month.") == "SUPPORTED"
    assert label("There is no information on the discount; the Pro plan costs 20 EUR per "
                 "month.") == "SUPPORTED"
    assert label("No discount is known. The Pro plan costs 20 EUR per month.") == "SUPPORTED"
    assert label("The Pro plan does not cost 20 EUR per month.") == "CONTRADICTED"
    assert label("The Pro plan costs 30 EUR per month.") == "CONTRADICTED"
    assert label("I don't know based on the available documents.") == "NOT_FOUND"
    # a citation marker is not a number the answer states (it was: "[20]" supported 20 EUR)
    assert label("The Pro plan costs 25 EUR per month. [20]") == "CONTRADICTED"


def test_the_heuristic_claim_rules_have_versions_of_their_own(monkeypatch):
    """Its claim-verification families' versions moved with the rules (rules_versions:
    faithfulness, citations, correctness); every other family's, and the Claude grader's,
    stayed as they were."""
    from raglab.commands.compose import compose_config
    from raglab.config import parse_run_config
    from raglab.graders.heuristic import HeuristicGrader
    from raglab.graders.spec import family_versions

    def versions(*overrides):
        cfg = parse_run_config(compose_config(list(overrides)))
        return family_versions(cfg.grader, {}, cfg.metrics)

    now, claude = versions(), versions("grader=claude")
    monkeypatch.setattr(HeuristicGrader, "rules_versions", {})
    before = versions()
    assert [f for f in now if now[f] != before[f]] == ["faithfulness", "citations",
                                                       "correctness"]
    # a negation's subject set apart from its scope moved the same three again
    monkeypatch.setattr(HeuristicGrader, "rules_versions",
                        {"correctness": 3, "faithfulness": 2, "citations": 2})
    previous = versions()
    assert [f for f in now if now[f] != previous[f]] == ["faithfulness", "citations",
                                                         "correctness"]
    assert versions("grader=claude") == claude
