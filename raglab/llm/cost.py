"""Per-case cost metering of model calls (a context variable, so concurrent cases and their
concurrent judgments each add to their own meter).

The runner opens a meter around grading one case; the grading orchestrator opens one around
each judgment it computes, records what it cost next to the cached judgment, and adds that
recorded cost to the case's meter again when the judgment comes from the cache. The LLM
client adds the cost of every grading response (a cached response's recorded cost too). So
a case's ``grading_cost_usd`` is what its judgments cost when they were made, on a first
run and on a cached re-run alike; ``model_usage`` in ``metrics.json`` is what a run spent.

A meter also lists the grading calls made inside it (:meth:`CostMeter.call`: model, tokens,
cost, latency, cached), and each of them in every meter it is nested in, so the case's
meter lists the calls that served the case (its ``grading_calls``); a judgment's meter
keeps them next to the cached judgment, and :meth:`CostMeter.replay` lists them again,
as cached, when a case takes the judgment from the cache.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

#: the most calls a meter lists (a case's record stays small whatever its grader does)
MAX_CALLS = 200


class CostMeter:
    def __init__(self, parent: CostMeter | None = None) -> None:
        self.usd = 0.0
        self.unpriced = False  # a cost that could not be known (no price, or not recorded)
        self.parent = parent
        #: the grading calls made inside it: {model, backend, purpose, input_tokens,
        #: output_tokens, cost_usd, latency_ms, cached, ...} (at most MAX_CALLS)
        self.calls: list[dict[str, Any]] = []

    def call(self, info: dict[str, Any]) -> None:
        """A grading call made inside this meter (listed in the meters it is nested in too;
        its cost is :meth:`add`'s)."""
        meter: CostMeter | None = self
        while meter is not None:
            if len(meter.calls) < MAX_CALLS:
                meter.calls.append(info)
            meter = meter.parent

    def replay(self, calls: Any, fresh: bool = False) -> None:
        """The calls recorded with a judgment this case took from the cache, listed as
        ``cached`` unless ``fresh`` (made by this run for several cases at once)."""
        for c in calls if isinstance(calls, list) else ():
            if isinstance(c, dict):
                self.call(c if fresh else {**c, "cached": True})

    def add(self, usd: float | None) -> None:
        if usd is None:
            self.unpriced = True
        else:
            self.usd += float(usd)

    def total(self) -> float | None:
        """The USD total, or None when any part of it is unknown."""
        return None if self.unpriced else round(self.usd, 9)


_METER: ContextVar[CostMeter | None] = ContextVar("raglab_cost_meter", default=None)


def current_meter() -> CostMeter | None:
    return _METER.get()


@contextlib.contextmanager
def metering() -> Iterator[CostMeter]:
    """A fresh meter for the calls made inside the block (in this task and the tasks it
    starts); the calls it lists are listed by the meter it is nested in too."""
    meter = CostMeter(_METER.get())
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)
