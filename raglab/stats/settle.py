"""How many paired cases it takes to settle a check: the interval a comparison would have
with ``N`` paired cases if the change seen so far held, and the smallest ``N`` at which a
check on it is no longer inconclusive.

A gate check reads the paired interval ``[low, high]`` of ``delta`` (candidate - baseline)
against a threshold ``t`` (raglab.compare.decide): a condition ``above t`` passes when the
interval lies above ``t`` and fails when it lies wholly below it (non-inferiority where
higher is better: ``t = -margin``); ``below t`` is the mirror. Between the two it is
inconclusive: the data neither show the requirement nor its breach.

The projection (:func:`projected`) keeps what was seen and changes only the number of
cases:

- an interval that is the paired score interval on gain and loss counts
  (raglab.stats.score.paired_interval: pass/fail metrics; the gain and loss mass of a
  sparse share; effective counts of weighted cases) is recomputed with every count scaled
  by ``N / n``: the same share of gains and losses in ``N`` cases, by the same function the
  comparison used. With nothing changed the interval of ``N`` cases is about ``+-z^2 / (N +
  z^2)``, so a non-inferiority margin of 0.05 at 95% is met from 74 cases;
- any other interval (bootstrap-t, sign-flip) keeps its estimate, and each end's distance
  from it shrinks as ``sqrt(n / N)``: the same spread of the paired differences.

:func:`cases_to_settle` searches the smallest ``N`` (at most :data:`MAX_CASES`) at which
every condition of a check is met, or one is breached. An estimate that sits on a threshold
is never settled by more cases of the same kind: it returns None then.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

#: the largest number of paired cases :func:`cases_to_settle` looks at
MAX_CASES = 10_000_000

Side = Literal["above", "below"]


@dataclass(frozen=True)
class Basis:
    """What a check's interval was made of: ``n`` paired cases, the estimate ``delta`` and
    its interval at ``confidence``; ``score``: ``(gain, loss, n_eff)`` when the interval is
    the paired score interval on those (possibly fractional) counts, else None;
    ``moments``: ``(sum w d^2, sum w |d|, mean weight)`` of a graded share's differences,
    whose score interval is in units of the scale they give (raglab.stats.bound)."""
    n: int
    delta: float
    ci_low: float
    ci_high: float
    confidence: float
    score: tuple[float, float, float] | None = None
    moments: tuple[float, float, float] | None = None


@dataclass(frozen=True)
class Condition:
    """``above``: met when the interval's low end is above ``threshold`` (``>=`` when not
    ``strict``), breached when its high end is below it; ``below`` the mirror."""
    side: Side
    threshold: float
    strict: bool = True

    def status(self, low: float, high: float) -> str:
        t = self.threshold
        if self.side == "above":
            met = low > t if self.strict else low >= t
            return "pass" if met else ("fail" if high < t else "inconclusive")
        met = high < t if self.strict else high <= t
        return "pass" if met else ("fail" if low > t else "inconclusive")


def projected(basis: Basis, cases: float) -> tuple[float, float]:
    """The interval of ``delta`` with ``cases`` paired cases if the change seen held
    (module docstring)."""
    if cases <= 0 or basis.n <= 0:
        raise ValueError(f"cases and basis.n must be positive, got {cases} and {basis.n}")
    f = cases / basis.n
    if basis.score is not None:
        from raglab.stats.bound import scale_of
        from raglab.stats.score import paired_interval

        g, lost, n_eff = basis.score
        s = 1.0
        if basis.moments is not None:     # the scale of N cases' moments (bound.py)
            m2, m1, pseudo = basis.moments
            s = float(scale_of(f * m2, f * m1, pseudo))
        lo, hi = paired_interval(g * f / s, lost * f / s, n_eff * f, basis.confidence)
        return float(lo[0]) * s, float(hi[0]) * s
    s = math.sqrt(1.0 / f)
    return (basis.delta - (basis.delta - basis.ci_low) * s,
            basis.delta + (basis.ci_high - basis.delta) * s)


def status_at(basis: Basis, conditions: Sequence[Condition], cases: float) -> str:
    """``fail`` when a condition is breached, ``pass`` when all are met, else
    ``inconclusive``, on the interval projected to ``cases``."""
    low, high = projected(basis, cases)
    statuses = [c.status(low, high) for c in conditions]
    if "fail" in statuses:
        return "fail"
    return "pass" if all(s == "pass" for s in statuses) else "inconclusive"


def cases_to_settle(basis: Basis, conditions: Sequence[Condition],
                    limit: int = MAX_CASES, after: int | None = None
                    ) -> tuple[int, str] | None:
    """``(N, outcome)``: the fewest paired cases (more than ``after``, by default
    ``basis.n``) at which the check would be ``pass`` or ``fail`` if the change seen held,
    and which; None when no number up to ``limit`` settles it (an estimate on a threshold).
    A projected interval narrows as ``N`` grows, so the first settled ``N`` is found by
    doubling, then bisection."""
    if not conditions:
        raise ValueError("a check needs at least one condition")
    lo = basis.n if after is None else max(int(after), 0)
    hi = lo + 1
    while status_at(basis, conditions, hi) == "inconclusive":
        if hi >= limit:
            return None
        lo, hi = hi, min(hi * 2, limit)
    while hi - lo > 1:           # the answer is in (lo, hi]
        mid = (lo + hi) // 2
        if status_at(basis, conditions, mid) == "inconclusive":
            lo = mid
        else:
            hi = mid
    return hi, status_at(basis, conditions, hi)



def score_basis(base, cand, weights=None, scaled: bool = False
                ) -> tuple[tuple[float, float, float], tuple[float, float, float] | None]:
    """``((gain, loss, n), moments)`` of one column's paired cases, read as
    raglab.stats.paired reads them for its score interval (the same pairing, ties and
    effective counts with weights), before any scale; ``moments``: with ``scaled`` (a
    graded share's score bound), those its scale is made of (raglab.stats.bound)."""
    import numpy as np

    from raglab.stats.bound import bound_moments
    from raglab.stats.paired import _design, _diffs, _groups, _score_counts

    b = np.asarray(base, dtype=np.float64)[:, None]
    c = np.asarray(cand, dtype=np.float64)[:, None]
    w, _ = _design(b.shape[0], weights, None)
    ok, diffs, _ = _diffs(b, c, w)
    group = next(_groups(diffs, ok, w, None), None)
    if group is None:
        return (0.0, 0.0, 0.0), None
    g, lost, n = (float(x[0]) for x in _score_counts(group.U, group.W, w is not None))
    moments = None
    if scaled:
        m2, m1, pseudo = (float(x[0]) for x in bound_moments(group.U, group.W))
        moments = (m2, m1, pseudo)
    return (g, lost, n), moments
