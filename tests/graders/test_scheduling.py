"""How grader calls are scheduled, against the fake Messages API (no absolute times): the
client keeps ``concurrency`` requests in flight across cases, never more, and the cases'
calls do not wait for the grouped reference decompositions they do not need."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from raglab.cache import StageCache
from raglab.config import MetricsCfg
from raglab.graders.claude import ClaudeGraderCfg, load_prompts
from raglab.graders.orchestrate import Grading
from raglab.graders.spec import family_versions
from raglab.llm.client import LLMClient
from raglab.runner.components import build_grader
from raglab.systems.base import WorkCounter
from tests.graders.fake_anthropic import fake_api, fake_model, user_text

__all__ = ["fake_api"]

MSG = "/v1/messages"
PROMPTS = load_prompts("pkg://raglab/graders/prompts")
CONCURRENCY = 4


class Case:
    answerable = True
    nuggets: list = []

    def __init__(self, i: int):
        self.id = f"c{i}"
        self.question = f"When are invoices of plan {i} due?"
        self.reference_answer = f"Invoices of plan {i} are due after {10 + i} days."


def _output(case: Case) -> dict:
    ref = case.reference_answer
    return {"case_id": case.id, "answer": f"{ref} [1]",
            "context": [{"doc_id": "d", "text": f"{ref} More text about it."}],
            "citations": [{"sentence": 0, "context": [0]}]}


def _is_references(body: dict) -> bool:
    return "decompositions" in json.dumps(body.get("output_config") or {})


def _grade(tmp_path, cases, wait_for_references: bool = False, usage: dict | None = None):
    """Grade ``cases`` (batched Claude grader) as a run does: the shared work is started,
    not waited for, unless ``wait_for_references``. The cases' verdicts, in case order
    (and the client's counts into ``usage``)."""
    c = ClaudeGraderCfg(name="claude", model="claude-test", concurrency=CONCURRENCY,
                        prompts="pkg://raglab/graders/prompts")

    class Run:
        grader = c

    async def go():
        llm = LLMClient(timeout_s=10, max_retries=1, concurrency=CONCURRENCY,
                        cache=StageCache(tmp_path))
        grading = Grading(build_grader(Run(), PROMPTS, llm), "claude",
                          family_versions(c, PROMPTS, MetricsCfg()), StageCache(tmp_path),
                          WorkCounter())
        try:
            if wait_for_references:
                await grading.prepare(cases)
            else:
                grading.start(cases)
            return await asyncio.gather(*(grading.grade(k, _output(k)) for k in cases))
        finally:
            if usage is not None:
                usage.update(llm.summary())
            await llm.aclose()

    return [vs for vs, _ in asyncio.run(go())]


def _slow(seconds_refs: float, seconds_other: float):
    def handler(body):
        time.sleep(seconds_refs if _is_references(body) else seconds_other)
        return fake_model(body)
    return handler


def test_requests_in_flight_reach_the_concurrency_and_never_exceed_it(fake_api, tmp_path):
    fake_api.handler = _slow(0.05, 0.05)
    verdicts = _grade(tmp_path, [Case(i) for i in range(12)])
    assert not [v for vs in verdicts for v in vs if v["error"]]
    assert fake_api.peak_in_flight == CONCURRENCY
    # and over time: at the server, never more at once than the client's slots
    spans = [(c["t"], c["t_end"]) for c in fake_api.calls(MSG)]
    assert max(sum(1 for b, e in spans if b <= t < e) for t, _ in spans) <= CONCURRENCY


def test_cases_do_not_wait_for_the_reference_decompositions(fake_api, tmp_path):
    """10 cases: 2 references calls (8 + 2) leave 2 of 4 slots to the cases' own calls
    while they are answered; a case that needs a reference waits for its call rather than
    asking again, and the verdicts are those of waiting for all of them first."""
    fake_api.handler = _slow(0.3, 0.01)
    cases = [Case(i) for i in range(10)]
    overlapped = _grade(tmp_path / "a", cases)
    calls = fake_api.calls(MSG)
    refs = [c for c in calls if _is_references(c["body"])]
    others = [c for c in calls if not _is_references(c["body"])]
    assert len(refs) == 2  # no reference decomposed a second time, one by one
    assert min(c["t"] for c in others) < max(c["t_end"] for c in refs)
    fake_api.reset()
    fake_api.handler = fake_model
    waited = _grade(tmp_path / "b", cases, wait_for_references=True)
    assert overlapped == waited


def test_a_failed_references_call_leaves_its_cases_to_decompose_one_by_one(fake_api,
                                                                          tmp_path):
    def handler(body):
        if _is_references(body) and 'index="8"' in user_text(body):
            return "not JSON"  # the 8-reference call: unusable, retried, then failed
        return fake_model(body)

    fake_api.handler = handler
    cases = [Case(i) for i in range(10)]
    verdicts = _grade(tmp_path, cases)
    assert not [v for vs in verdicts for v in vs if v["error"]]
    refs = [c for c in fake_api.calls(MSG) if _is_references(c["body"])]
    assert len(refs) == 2 + 1 + 8  # 2 attempts (one re-ask) of the failed call, the other, 8 alone
    assert all(any(v["family"] == "correctness" and v["kind"] == "claim" for v in vs)
               for vs in verdicts)


@pytest.mark.parametrize("others_s", [0.0, 0.3])
def test_a_lone_reference_unusable_is_asked_twice_and_its_correctness_is_an_error(
        fake_api, tmp_path, others_s):
    """A references call of one reference is that reference asked alone already: its case
    does not ask again (the same request) after the call and its re-ask were unusable,
    whether it waits for the call or asks after it ended (the case's other calls slow)."""
    def handler(body):
        if _is_references(body):
            return "not JSON"
        time.sleep(others_s)
        return fake_model(body)

    fake_api.handler = handler
    usage: dict = {}
    [verdicts] = _grade(tmp_path, [Case(0)], usage=usage)
    refs = [c for c in fake_api.calls(MSG) if _is_references(c["body"])]
    assert len(refs) == 2  # the call and its one re-ask
    assert (usage["format_re_asks"], usage["single_item_calls"],
            usage["unreadable_items"]) == (1, 0, 1)
    errors = [v for v in verdicts if v["error"]]
    assert [(v["family"], v["kind"]) for v in errors] == [("correctness", "claim")]
    assert "unusable structured output" in errors[0]["error"]
    assert {v["family"] for v in verdicts} >= {"faithfulness", "relevance"}
