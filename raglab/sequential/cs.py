"""An anytime-valid confidence sequence for the mean of paired differences in ``[-1, 1]``.

The differences ``d_i`` (candidate - baseline of a pass/fail or ``[0, 1]`` metric, in the
order the cases were run) are mapped to ``x_i = (1 + d_i) / 2`` in ``[0, 1]``, whose mean
is ``m = (1 + delta) / 2``. The sequence is the hedged-capital betting confidence sequence
of Waudby-Smith & Ramdas (2024, "Estimating means of bounded random variables by betting",
JRSS-B, Theorem 3) with predictable plug-in bets:

- ``mu_t = (1/2 + sum_{i<=t} x_i) / (t + 1)``,
  ``s2_t = (1/4 + sum_{i<=t} (x_i - mu_i)^2) / (t + 1)``;
- ``lam_t = sqrt(2 log(2 / alpha) / (s2_{t-1} t log(1 + t)))`` (``s2_0 = 1/4``), read from
  the cases before ``t`` only (predictable);
- ``K+_t(m) = prod_{i<=t} (1 + min(lam_i, c / m) (x_i - m))`` and
  ``K-_t(m) = prod_{i<=t} (1 - min(lam_i, c / (1 - m)) (x_i - m))`` with ``c = 3/4``;
- ``m`` is excluded at time ``t`` when ``max(K+_t(m), K-_t(m)) / 2 >= 1 / alpha``.

``(K+ + K-) / 2`` is a nonnegative martingale at the true mean, so by Ville's inequality
the true mean is excluded at ANY time with probability at most ``alpha``; ``K+`` alone
exceeds ``2 / alpha`` with probability at most ``alpha / 2``: each side of the sequence
holds at ``alpha / 2``, as each side of the two-sided fixed-n interval the gates read.
``K+`` is nonincreasing in ``m`` and ``K-`` nondecreasing, so the excluded values are a
low ray (``K+`` large: the mean lies above them) and a high ray, and the sequence is an
interval. It is intersected over time (still anytime-valid), so it only narrows.

:func:`crossings` gives, for thresholds, the first time each side excluded them (exact,
no grid); :func:`confidence_sequence` the interval after each case on a grid of ``delta``
(its ends rounded outwards to the grid). Pure functions of numpy arrays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: the bets' cap: a bet never stakes more than ``c`` of the capital on one case
C = 0.75
#: the grid step on the scale of ``delta`` of :func:`confidence_sequence`
GRID_STEP = 1e-3


def _as_x(diffs: Sequence[float] | np.ndarray) -> np.ndarray:
    d = np.asarray(diffs, dtype=np.float64).reshape(-1)
    if d.size and (not np.all(np.isfinite(d)) or d.min() < -1 or d.max() > 1):
        raise ValueError("paired differences must be finite and within [-1, 1]")
    return (1.0 + d) / 2.0


def bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """The predictable plug-in bets ``lam_t`` (module docstring) of the cases ``x`` in
    ``[0, 1]``: ``lam_t`` reads ``x_1 .. x_{t-1}`` only."""
    n = x.shape[0]
    t = np.arange(1, n + 1, dtype=np.float64)
    mu = (0.5 + np.cumsum(x)) / (t + 1)
    s2 = (0.25 + np.cumsum((x - mu) ** 2)) / (t + 1)
    s2_prev = np.concatenate(([0.25], s2[:-1]))
    return np.sqrt(2.0 * math.log(2.0 / alpha) / (s2_prev * t * np.log1p(t)))


def log_capitals(diffs: Sequence[float] | np.ndarray, deltas: Sequence[float] | np.ndarray,
                 alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """``(log K+, log K-)``, each of shape ``(cases, len(deltas))``: the running log capital
    after each case of the bets against each hypothesised mean difference ``delta``
    (module docstring; ``K+`` grows when the mean lies above ``delta``)."""
    x = _as_x(diffs)
    m = (1.0 + np.asarray(deltas, dtype=np.float64).reshape(-1)) / 2.0
    lam = bets(x, alpha)[:, None]
    with np.errstate(divide="ignore"):
        cap_up = np.where(m > 0, C / np.where(m > 0, m, 1.0), np.inf)[None, :]
        cap_down = np.where(m < 1, C / np.where(m < 1, 1.0 - m, 1.0), np.inf)[None, :]
    dev = x[:, None] - m[None, :]
    up = np.cumsum(np.log1p(np.minimum(lam, cap_up) * dev), axis=0)
    down = np.cumsum(np.log1p(-np.minimum(lam, cap_down) * dev), axis=0)
    return up, down


def crossings(diffs: Sequence[float] | np.ndarray, thresholds: Sequence[float],
              alpha: float) -> list[tuple[int | None, int | None]]:
    """For each threshold ``t`` on ``delta``: ``(above, below)``, the number of cases after
    which the sequence first lay wholly above ``t`` (``K+_t`` reached ``2 / alpha``) and
    wholly below it (``K-``), or None when it has not (yet)."""
    up, down = log_capitals(diffs, thresholds, alpha)
    level = math.log(2.0 / alpha)
    out: list[tuple[int | None, int | None]] = []
    for j in range(up.shape[1]):
        a, b = (np.flatnonzero(side[:, j] >= level) for side in (up, down))
        out.append((int(a[0]) + 1 if a.size else None, int(b[0]) + 1 if b.size else None))
    return out


def confidence_sequence(diffs: Sequence[float] | np.ndarray, alpha: float,
                        step: float = GRID_STEP) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` of ``delta`` after each case (running intersection; ends rounded
    outwards to the grid of ``step``): every ``delta <= low`` and ``>= high`` has been
    excluded."""
    k = int(round(2.0 / step))
    grid = np.linspace(-1.0, 1.0, k + 1)
    up, down = log_capitals(diffs, grid, alpha)
    level = math.log(2.0 / alpha)
    below = np.maximum.accumulate(up >= level, axis=0)   # the mean lies above these
    above = np.maximum.accumulate(down >= level, axis=0)
    # monotone in delta: `below` is a prefix of the grid, `above` a suffix (the last
    # excluded point from each end, so rounding cannot let a gap through)
    n_low = np.where(below.any(axis=1), k + 1 - np.argmax(below[:, ::-1], axis=1), 0)
    n_high = np.where(above.any(axis=1), k + 1 - np.argmax(above, axis=1), 0)
    low = np.where(n_low > 0, grid[np.maximum(n_low - 1, 0)], -1.0)
    high = np.where(n_high > 0, grid[np.minimum(k + 1 - n_high, k)], 1.0)
    return low, high
