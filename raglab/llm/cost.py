"""Per-case cost metering of model calls (a context variable, so concurrent cases and their
concurrent judgments each add to their own meter).

The runner opens a meter around grading one case; the grading orchestrator opens one around
each judgment it computes, records what it cost next to the cached judgment, and adds that
recorded cost to the case's meter again when the judgment comes from the cache. The LLM
client adds the cost of every grading response (a cached response's recorded cost too). So
a case's ``grading_cost_usd`` is what its judgments cost when they were made, on a first
run and on a cached re-run alike; ``model_usage`` in ``metrics.json`` is what a run spent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar


class CostMeter:
    def __init__(self) -> None:
        self.usd = 0.0
        self.unpriced = False  # a cost that could not be known (no price, or not recorded)

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
    starts)."""
    meter = CostMeter()
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)
