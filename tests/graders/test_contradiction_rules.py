"""The offline grader's contradiction rules (docs/graders.md, "Contradictions"): a quantity
of the claim that differs from the evidence's of the same unit, a date or time that differs,
a term negated in the one and affirmed in the other. Each rule with its near misses: the
same value written otherwise is no contradiction."""

from __future__ import annotations

import pytest

from raglab.graders.heuristic import context_windows, verify_claim
from raglab.graders.quantities import (
    canonical,
    disagreement,
    polarity_disagreement,
    polarity_terms,
    quantities,
)


def verify(claim: str, *passages: str) -> str:
    return verify_claim(claim, context_windows(list(passages)), 72)[0]


# ---- quantities -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("5 days", {("duration", 432000.0)}),
    ("five days", {("duration", 432000.0)}),
    ("1,000 seats", {("seat", 1000.0)}),
    ("1000 seats", {("seat", 1000.0)}),
    ("one hour", {("duration", 3600.0)}),
    ("60 minutes", {("duration", 3600.0)}),
    ("a two-year warranty", {("months", 24.0)}),
    ("2 km", {("length", 2000.0)}),
    ("2000 m", {("length", 2000.0)}),
    ("5 to 10 business days", {("workday", 5.0), ("workday", 10.0)}),
    ("£150", {("cur:gbp", 150.0)}),
    ("20 EUR per month", {("cur:eur", 20.0)}),
    ("30%", {("percent", 30.0)}),
    ("30 percent", {("percent", 30.0)}),
    ("Net 10", {("after:net", 10.0)}),
    ("20 per month", {("", 20.0)}),
    ("every hour", {("duration", 3600.0)}),
    ("5 pm", {("clock", 1020.0)}),
    ("17:00", {("clock", 1020.0)}),
    ("10.30 am", {("clock", 630.0)}),
    ("10.30 pm", {("clock", 1350.0)}),
    ("1 April", {("date", 401.0), ("dom", 1.0)}),
    ("April 1st", {("date", 401.0), ("dom", 1.0)}),
    ("the 25th", {("dom", 25.0)}),
    ("March 2026", {("year", 2026.0)}),
    # no quantity: a code's digits, a number word without its unit
    ("UTF-8, CAMT.053, T2 and CD-410", set()),
    ("one of the preset terms", set()),
])
def test_quantities_with_their_units(text, expected):
    assert quantities(text) == expected


def test_equal_quantities_are_one_term():
    assert canonical("three days").split()[0] == canonical("72 hours").split()[0]
    assert canonical("5 pm").split()[0] == canonical("17:00").split()[0]
    assert canonical("three days").split()[0] != canonical("3 hours").split()[0]


@pytest.mark.parametrize("claim, evidence, expected", [
    ("due in 30 days", "due in 10 days", "number"),
    ("due in 10 days", "due in 10 days", None),
    ("five business days", "5 business days", None),         # a number word is its digits
    ("1,000 seats", "1000 seats", None),                      # thousands separator
    ("5 days", "five days", None),
    ("one hour", "60 minutes", None),                         # converted units
    ("one hour", "15 minutes", "number"),
    ("2 km", "2000 m", None),
    ("two-year warranty", "12-month warranty", "number"),
    ("€699", "€69", "number"),
    ("€0.20 per transfer", "until 12:00 CET", None),          # other units: not compared
    ("5 times", "after 5 minutes", None),
    ("5 times", "up to 8 times", "number"),
    ("UTF-8", "CAMT.053", None),                              # codes are no numbers
    ("5 business days", "5 days", None),                      # another unit: not compared
    ("starts on 1 January", "runs from 1 April to 31 March", "date"),
    ("by 5 pm on the 25th", "by 17:00 on the 25th", None),
    ("by 17:00 on the 20th", "by 17:00 on the 25th", "date"),
    ("at 6 am", "at 06:00", None),
    ("starts at 10:30", "starts at 10.30 am", None),          # a dot between hours, minutes
    ("starts at 10:30", "starts at 11.30 am", "date"),
    ("costs €10.30", "costs €10.30", None),                   # a price is no time
    ("sync every hour", "sync every 4 hours", "number"),
])
def test_a_quantity_differs_only_from_one_of_the_same_unit(claim, evidence, expected):
    assert disagreement(claim, evidence) == expected


# ---- negation -------------------------------------------------------------------------------

@pytest.mark.parametrize("claim, evidence, expected", [
    ("Goodwill credits require approval.", "Goodwill credits need no approval.", True),
    ("Refunds are not paid to the card.", "Refunds are paid to the card.", True),
    ("Timestamps are in UTC.", "Timestamps are in local time, not in UTC.", True),
    # a negation over other words is no disagreement
    ("Refunds are free.", "Refunds are free, but the fee is not returned.", False),
    ("Erasure completes within 30 days.", "Erasure completes within 30 days and cannot be "
                                          "undone.", False),
    ("The customer gets a refund receipt.", "If a customer has not seen the refund, give "
                                            "them the refund receipt.", False),
    ("Sales amounts are kept.", "Sales records are kept, amounts remain, the customer link "
                                "does not.", False),
    ("Refunds are not paid in cash.", "Refunds are never paid in cash.", False),
    # the same negative in another word order: the words before a negation are its subject
    ("The free tier does not include SSO.", "SSO is not included in the free tier.", False),
    ("The service is not available on weekends.", "On weekends the service is not "
                                                  "available.", False),
    ("The free tier includes SSO.", "SSO is not included in the free tier.", True),
    ("The service is available on weekends.", "On weekends the service is not "
                                              "available.", True),
    # both negate the same words: the same negative, whatever else the evidence affirms
    ("No approval is needed for refunds under €50.", "Refunds under €50 need no approval; "
     "larger refunds require manager approval.", False),
    # "not ... until X" happens at X; "can't ... without X" needs X
    ("The card is not charged until delivery.", "The card is charged on delivery, not at "
                                                "checkout.", False),
    ("The card is charged at checkout.", "The card is charged on delivery, not at "
                                         "checkout.", True),
    ("Users can't export reports without admin rights.", "Exporting reports requires admin "
     "rights; other users cannot export.", False),
])
def test_a_negation_disagrees_over_the_same_terms_only(claim, evidence, expected):
    assert polarity_disagreement(claim, evidence) is expected


def test_a_time_or_a_number_is_not_cut_into_clauses():
    assert "qclock630" in polarity_terms("The desk does not open at 10:30.")[1]
    assert "qseat1000" in polarity_terms("It has no limit of 1,000 seats.")[1]


@pytest.mark.parametrize("claim, evidence, expected", [
    ("The free tier does not include SSO.", "SSO is not included in the free tier.",
     {"SUPPORTED"}),
    ("The service is not available on weekends.",
     "On weekends the service is not available.", {"SUPPORTED"}),
    ("No approval is needed for refunds under €50.",
     "Refunds under €50 need no approval; larger refunds require manager approval.",
     {"SUPPORTED"}),
    ("The card is not charged until delivery.",
     "The card is charged on delivery, not at checkout.", {"SUPPORTED"}),
    ("Users can't export reports without admin rights.",
     "Exporting reports requires admin rights; other users cannot export.",
     {"SUPPORTED", "NOT_FOUND"}),
    ("The free tier includes SSO.", "SSO is not included in the free tier.",
     {"CONTRADICTED"}),
])
def test_a_negative_in_another_word_order_is_no_contradiction(claim, evidence, expected):
    assert verify(claim, evidence) in expected


# ---- the rules in verification --------------------------------------------------------------

def test_a_number_stated_otherwise_still_supports():
    ctx = "Refunds reach the customer's card within 2 business days."
    assert verify("Refunds reach the customer's card within two business days.", ctx) == \
        "SUPPORTED"
    assert verify("Refunds reach the customer's card within five business days.", ctx) == \
        "CONTRADICTED"
    ctx = "Automatic updates run at 03:00 shop time while the reader charges."
    assert verify("Automatic updates run at 3 am shop time while the reader charges.", ctx) == \
        "SUPPORTED"
    assert verify("Automatic updates run at 4 am shop time while the reader charges.", ctx) == \
        "CONTRADICTED"


def test_a_number_of_another_unit_is_not_a_contradiction():
    ctx = ("SEPA Instant transfers cost nothing extra and can be funded until 12:00 CET on "
           "the business day before payday.")
    assert verify("SEPA Instant transfers cost €0.20 extra.", ctx) != "CONTRADICTED"


def test_a_date_that_differs_contradicts():
    ctx = "The financial year runs from 1 April to 31 March by default."
    assert verify("The financial year starts on 1 January by default.", ctx) == "CONTRADICTED"
    assert verify("The financial year starts on 1 April by default.", ctx) == "SUPPORTED"


def test_a_negation_elsewhere_in_the_sentence_does_not_contradict():
    ctx = "The refund reaches the card in 5 to 10 business days, and the fee is not returned."
    assert verify("The refund reaches the card in 5 to 10 business days.", ctx) == "SUPPORTED"
    assert verify("The refund does not reach the card in 5 to 10 business days.", ctx) == \
        "CONTRADICTED"


def test_the_claim_is_aligned_by_its_words_not_its_numbers():
    # "30 days" in the next sentence is what customers expect, not the default
    ctx = ("Invoices are due 10 calendar days after the invoice date by default. Many "
           "customers expect 30 days because that is common elsewhere.")
    assert verify("Invoices are due 30 days after the invoice date by default.", ctx) == \
        "CONTRADICTED"
    assert verify("Invoices are due 10 days after the invoice date by default.", ctx) == \
        "SUPPORTED"
