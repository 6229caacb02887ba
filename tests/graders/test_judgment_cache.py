"""A judgment is cached with its cost and the calls that made it, so a resumed run lists the
same grading calls and knows its cost: a process killed between the two writes (seen by the
slow SIGKILL test) must never leave a judgment whose cost and calls are lost."""

from __future__ import annotations

import asyncio

import pytest

from raglab.cache import StageCache
from raglab.config import MetricsCfg
from raglab.graders.claude import ClaudeGraderCfg
from raglab.graders.orchestrate import Grading
from raglab.graders.spec import family_versions
from raglab.llm.client import LLMClient
from raglab.llm.cost import metering
from raglab.runner.components import build_grader
from raglab.systems.base import WorkCounter
from tests.graders.fake_anthropic import fake_api
from tests.graders.test_scheduling import PROMPTS, Case, _output

__all__ = ["fake_api"]

PRICES = {"claude-test": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3}}


class Killed(Exception):
    """The process dying at this write (what it wrote before stays, nothing after)."""


class DiesAtWrite(StageCache):
    """A stage cache whose ``n``-th write of a judgment's entries (``grade`` or
    ``grade_cost``) never happens: the process is killed there."""

    def __init__(self, root, n: int):
        super().__init__(root)
        self.n = n
        self.writes = 0

    def put(self, ns, key, value):
        if ns in ("grade", "grade_cost"):
            self.writes += 1
            if self.writes == self.n:
                raise Killed
        super().put(ns, key, value)


def _grade(cache_dir, case: Case, cache_class=StageCache, **kw):
    """The case graded as a run does (the batched Claude grader, the references call
    first): what its case meter lists and totals."""
    cfg = ClaudeGraderCfg(name="claude", model="claude-test", concurrency=2,
                          prompts="pkg://raglab/graders/prompts")

    class Run:
        grader = cfg

    async def go():
        llm = LLMClient(timeout_s=10, max_retries=1, concurrency=2, prices=PRICES,
                        cache=StageCache(cache_dir))
        grading = Grading(build_grader(Run(), PROMPTS, llm), "claude",
                          family_versions(cfg, PROMPTS, MetricsCfg()),
                          cache_class(cache_dir, **kw), WorkCounter())
        try:
            await grading.prepare([case])  # the run's shared work, outside any case
            with metering() as meter:  # the case's own meter, as the runner opens it
                await grading.grade(case, _output(case))
            return meter
        finally:
            await llm.aclose()

    return asyncio.run(go())


def _calls(meter) -> list[tuple]:
    return sorted(tuple(str(c.get(k)) for k in ("family", "purpose", "model", "served"))
                  for c in meter.calls)


# the 2nd write is the references call's (raglab.graders.grouped); the 4th, the first of
# the case's own judgments (raglab.graders.orchestrate)
@pytest.mark.parametrize("write", [2, 4])
def test_a_kill_between_a_judgments_writes_loses_neither_its_cost_nor_its_calls(
        fake_api, tmp_path, write):
    case = Case(1)
    clean = _grade(tmp_path / "clean", case)
    assert clean.total() is not None and len(clean.calls) >= 3
    with pytest.raises(Killed):
        _grade(tmp_path / "killed", case, DiesAtWrite, n=write)
    resumed = _grade(tmp_path / "killed", case)
    assert _calls(resumed) == _calls(clean)
    # known (the amount differs: the fake API, like the real one, reads back the system
    # prompt it cached for the first runs, and a read costs less than a write)
    assert resumed.total() is not None and resumed.total() > 0
