"""When a gate check is settled on the confidence sequence (:mod:`.cs`).

A check reads its conditions on the interval of ``delta`` (raglab.compare.settling:
``non_inferior``, and a ``bound`` on a change ``by: interval``) and has the three outcomes
of a fixed-n decision (raglab.compare.decide): ``pass`` when the sequence lies wholly on
the good side of every condition's threshold, ``fail`` when it lies wholly on the bad side
of one, else ``inconclusive``. The sequence holds each side at ``alpha / 2`` (``alpha = 1
- confidence`` of the gate set), as each side of the fixed-n interval does, and it is
valid at any number of cases, however the number was chosen: a run may stop as soon as
every check is settled. A threshold is compared exactly (the capital bet against it, not
a grid), so ``strict`` makes no difference there (a single point has no width).

Once settled a check stays settled: the sequence is intersected over time, so the first
time a side excludes a threshold fixes the outcome (were both sides ever to exclude it,
the sequence would be empty; the first one counts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from raglab.sequential.cs import confidence_sequence, crossings
from raglab.stats.settle import Condition


@dataclass(frozen=True)
class Settled:
    """A check on the sequence after ``n`` paired cases: ``status`` (pass, fail or
    inconclusive), ``at`` the number of paired cases after which it was settled (None while
    inconclusive), and the sequence's interval ``[low, high]`` now (None when not asked
    for: it costs a grid of capitals)."""
    status: str
    at: int | None
    n: int
    low: float | None = None
    high: float | None = None


def _condition_at(c: Condition, above: int | None, below: int | None
                  ) -> tuple[str, int | None]:
    good, bad = (above, below) if c.side == "above" else (below, above)
    if good is not None and (bad is None or good <= bad):
        return "pass", good
    if bad is not None:
        return "fail", bad
    return "inconclusive", None


def settle(diffs: Sequence[float] | np.ndarray, conditions: Sequence[Condition],
           alpha: float, interval: bool = True, target: float | None = None,
           weights: Sequence[float] | np.ndarray | None = None) -> Settled:
    """A check's outcome on the paired differences ``diffs`` (in ``[-1, 1]``, in the order
    the cases were run; cases where the metric does not apply in both runs left out):
    ``fail`` as soon as one condition is breached, ``pass`` once all are met (``at``: the
    case after which the last one was), else ``inconclusive``; with ``interval`` the
    sequence's interval now (raglab.sequential.cs.confidence_sequence); ``target`` (the
    bets' tuning) and ``weights`` (in ``[0, 1]``, one per difference) as
    raglab.sequential.cs.bets."""
    if not conditions:
        raise ValueError("a check needs at least one condition")
    d = np.asarray(diffs, dtype=np.float64).reshape(-1)
    if d.size == 0:
        return Settled("inconclusive", None, 0, -1.0, 1.0)
    cross = crossings(d, [c.threshold for c in conditions], alpha, target, weights)
    outcomes = [_condition_at(c, a, b) for c, (a, b) in zip(conditions, cross)]
    lo = hi = None
    if interval:
        low, high = confidence_sequence(d, alpha, target=target, weights=weights)
        lo, hi = float(low[-1]), float(high[-1])
    fails = [at for s, at in outcomes if s == "fail"]
    if fails:
        return Settled("fail", min(a for a in fails if a is not None), d.size, lo, hi)
    if all(s == "pass" for s, _ in outcomes):
        return Settled("pass", max(a for _, a in outcomes if a is not None), d.size, lo, hi)
    return Settled("inconclusive", None, d.size, lo, hi)


def all_settled(checks: Sequence[Settled]) -> bool:
    """Every check is pass or fail: a sequential run may stop."""
    return all(c.status != "inconclusive" for c in checks)
