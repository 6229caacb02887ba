"""Claim verdicts name the context passage that supported them (for
``final.context_precision_graded``): the offline grader from its aligned sentence, the
Claude grader from the evidence quote it returns."""

import asyncio

from raglab.graders.heuristic import HeuristicGrader, HeuristicGraderCfg
from tests.graders.fake_anthropic import fake_api, fake_model
from tests.graders.test_claude_grader import with_grader

__all__ = ["fake_api"]

PASSAGES = ["Exports run nightly at 02:00 UTC.",
            "Refunds are paid back to the original card within 5 business days.",
            "The refund fee is waived for Pro plans."]


def test_heuristic_verify_returns_the_supporting_passage_index():
    g = HeuristicGrader(HeuristicGraderCfg(name="heuristic"))
    res = asyncio.run(g.verify(["Refunds are paid back to the original card within 5 business days",
                                "The refund fee is waived for Pro plans",
                                "Payroll runs on Fridays"], PASSAGES, "faithfulness"))
    assert [r[0] for r in res] == ["SUPPORTED", "SUPPORTED", "NOT_FOUND"]
    assert [r[2] for r in res[:2]] == [1, 2]


def test_claude_verify_locates_the_evidence_quote_in_a_passage(fake_api):
    fake_api.handler = fake_model
    claims = ["The refund fee is waived for Pro plans", "Exports run nightly at 02:00 UTC"]
    res = with_grader(lambda g: g.verify(claims, PASSAGES, "faithfulness"))
    assert [r[0] for r in res] == ["SUPPORTED", "SUPPORTED"]
    assert [r[2] for r in res] == [2, 0]
