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
        from raglab.stats.score import paired_interval

        g, lost, n_eff = basis.score
        s = 1.0
        if basis.moments is not None:     # the scale of N cases' moments (bound.py)
            m2, m1, pseudo = basis.moments
            s = min((f * m2 + pseudo) / (f * m1 + pseudo), 1.0) if f * m1 + pseudo > 0 else 1.0
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
    hi = max(lo, 1)
    if lo == 0 and status_at(basis, conditions, 1) != "inconclusive":
        return 1, status_at(basis, conditions, 1)
    while True:
        hi = min(hi * 2, limit)
        if status_at(basis, conditions, hi) != "inconclusive":
            break
        if hi >= limit:
            return None
        lo = hi
    while hi - lo > 1:           # the answer is in (lo, hi]
        mid = (lo + hi) // 2
        if status_at(basis, conditions, mid) == "inconclusive":
            lo = mid
        else:
            hi = mid
    return hi, status_at(basis, conditions, hi)


def score_counts(base, cand, weights=None) -> tuple[float, float, float]:
    """``(gain, loss, n)`` of the paired cases where both values are finite (and the weight
    positive), as the score interval of raglab.stats.paired reads them before any scale:
    the summed positive and negative differences (counts for pass/fail values), or their
    effective figures with weights (raglab.stats.score.weighted_counts, which scale with
    the masses, so a scale divides them afterwards)."""
    import numpy as np

    b = np.asarray(base, dtype=np.float64)
    c = np.asarray(cand, dtype=np.float64)
    ok = np.isfinite(b) & np.isfinite(c)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    if w is not None:
        ok &= w > 0
    d = c[ok] - b[ok]
    gain, loss = np.maximum(d, 0.0), np.maximum(-d, 0.0)
    if w is None:
        return float(gain.sum()), float(loss.sum()), float(ok.sum())
    from raglab.stats.score import weighted_counts

    g, lost, n = weighted_counts(gain, loss, w[ok])
    return float(g), float(lost), float(n)


def share_moments(base, cand, weights=None) -> tuple[float, float, float]:
    """``(sum w d^2, sum w |d|, mean weight)`` of the paired differences: what the score
    bound's scale of a graded share is made of (raglab.stats.bound.bound_scale)."""
    import numpy as np

    b = np.asarray(base, dtype=np.float64)
    c = np.asarray(cand, dtype=np.float64)
    ok = np.isfinite(b) & np.isfinite(c)
    w = np.ones_like(b) if weights is None else np.asarray(weights, dtype=np.float64)
    ok &= w > 0
    a = np.abs(c[ok] - b[ok])
    ww = w[ok]
    return float((ww * a * a).sum()), float((ww * a).sum()), float(ww.sum() / max(len(a), 1))
