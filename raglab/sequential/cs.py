"""An anytime-valid confidence sequence for the mean of paired differences in ``[-1, 1]``.

The differences ``d_i`` (candidate - baseline of a pass/fail or ``[0, 1]`` metric, in the
order the cases were run) are mapped to ``x_i = (1 + d_i) / 2`` in ``[0, 1]``, whose mean
is ``m = (1 + delta) / 2``. The sequence is the hedged-capital betting confidence sequence
of Waudby-Smith & Ramdas (2024, "Estimating means of bounded random variables by betting",
JRSS-B, Theorem 3) with predictable plug-in bets:

- ``mu_t = (1/2 + sum_{i<=t} x_i) / (t + 1)``,
  ``s2_t = (1/4 + sum_{i<=t} (x_i - mu_i)^2) / (t + 1)``;
- ``lam_t = sqrt(2 log(2 / alpha) / (s2_{t-1} min(t log(1 + t), N)))`` (``s2_0 = 1/4``),
  read from the cases before ``t`` only (predictable). ``N`` (``target``) tunes the bets
  to a run of known size: W-S&R's bet for a fixed ``N`` is ``sqrt(2 log(2 / alpha) /
  (s2 N))``; taking the larger of it and the anytime bet keeps the early bets of the
  anytime sequence and then stakes what suits ``N`` cases. ``N`` is fixed before the first
  case (half the check's paired cases in the whole run, raglab.sequential.run), so the bets
  stay predictable and the guarantee below holds at any time; without it (None) the
  anytime bets throughout;
- ``K+_t(m) = prod_{i<=t} (1 + min(lam_i, c / m) (x_i - m))`` and
  ``K-_t(m) = prod_{i<=t} (1 - min(lam_i, c / (1 - m)) (x_i - m))`` with ``c = 3/4``;
- ``m`` is excluded at time ``t`` when ``max(K+_t(m), K-_t(m)) / 2 >= 1 / alpha``.

Weights (``weights``, each case's weight divided by a constant fixed before the first
case, the largest weight, so that ``w_i`` lies in ``[0, 1]``): the capital multiplies by
``1 + lam_i w_i (x_i - m)`` instead, and ``mu``/``s2`` are the weighted running mean and
variance (``1`` and ``t`` become ``1 + sum w``). If the cases ``(w_i, x_i)`` are drawn
alike, ``E[w_i (x_i - m) | past] = E[w x] - m E[w] = 0`` exactly at ``m = E[w x] / E[w]``,
the weighted mean, so the capital is again a martingale there, and it stays nonnegative
since ``w_i`` in ``[0, 1]`` only shrinks the stake; with every weight 1 it is the
unweighted sequence, bit for bit.

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


def _as_w(weights: Sequence[float] | np.ndarray | None, n: int) -> np.ndarray:
    if weights is None:
        return np.ones(n)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.shape[0] != n:
        raise ValueError(f"{w.shape[0]} weights for {n} paired differences")
    if w.size and (not np.all(np.isfinite(w)) or w.min() < 0 or w.max() > 1):
        raise ValueError("the sequence's weights must lie in [0, 1] (divide by the largest)")
    return w


def bets(x: np.ndarray, alpha: float, target: float | None = None,
         weights: np.ndarray | None = None) -> np.ndarray:
    """The predictable plug-in bets ``lam_t`` (module docstring) of the cases ``x`` in
    ``[0, 1]``: ``lam_t`` reads ``x_1 .. x_{t-1}`` only; ``target``: the ``N`` they are
    tuned to (None: not tuned); ``weights``: in ``[0, 1]`` (None: all 1)."""
    n = x.shape[0]
    t = np.arange(1, n + 1, dtype=np.float64)
    w = _as_w(weights, n)
    cw = 1.0 + np.cumsum(w)
    mu = (0.5 + np.cumsum(w * x)) / cw
    s2 = (0.25 + np.cumsum(w * (x - mu) ** 2)) / cw
    s2_prev = np.concatenate(([0.25], s2[:-1]))
    scale = t * np.log1p(t)
    if target is not None:
        if not (math.isfinite(target) and target > 0):
            raise ValueError("the bets' target must be a positive number of cases")
        scale = np.minimum(scale, float(target))
    return np.sqrt(2.0 * math.log(2.0 / alpha) / (s2_prev * scale))


def log_capitals(diffs: Sequence[float] | np.ndarray, deltas: Sequence[float] | np.ndarray,
                 alpha: float, target: float | None = None,
                 weights: Sequence[float] | np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``(log K+, log K-)``, each of shape ``(cases, len(deltas))``: the running log capital
    after each case of the bets against each hypothesised mean difference ``delta``
    (module docstring; ``K+`` grows when the mean lies above ``delta``); ``target`` and
    ``weights`` as :func:`bets`."""
    x = _as_x(diffs)
    w = _as_w(weights, x.shape[0])
    m = (1.0 + np.asarray(deltas, dtype=np.float64).reshape(-1)) / 2.0
    lam = bets(x, alpha, target, w)[:, None]
    with np.errstate(divide="ignore"):
        cap_up = np.where(m > 0, C / np.where(m > 0, m, 1.0), np.inf)[None, :]
        cap_down = np.where(m < 1, C / np.where(m < 1, 1.0 - m, 1.0), np.inf)[None, :]
    dev = w[:, None] * (x[:, None] - m[None, :])
    up = np.cumsum(np.log1p(np.minimum(lam, cap_up) * dev), axis=0)
    down = np.cumsum(np.log1p(-np.minimum(lam, cap_down) * dev), axis=0)
    return up, down


def crossings(diffs: Sequence[float] | np.ndarray, thresholds: Sequence[float],
              alpha: float, target: float | None = None,
              weights: Sequence[float] | np.ndarray | None = None
              ) -> list[tuple[int | None, int | None]]:
    """For each threshold ``t`` on ``delta``: ``(above, below)``, the number of cases after
    which the sequence first lay wholly above ``t`` (``K+_t`` reached ``2 / alpha``) and
    wholly below it (``K-``), or None when it has not (yet); ``target`` and ``weights`` as
    :func:`bets`."""
    up, down = log_capitals(diffs, thresholds, alpha, target, weights)
    level = math.log(2.0 / alpha)
    out: list[tuple[int | None, int | None]] = []
    for j in range(up.shape[1]):
        a, b = (np.flatnonzero(side[:, j] >= level) for side in (up, down))
        out.append((int(a[0]) + 1 if a.size else None, int(b[0]) + 1 if b.size else None))
    return out


def confidence_sequence(diffs: Sequence[float] | np.ndarray, alpha: float,
                        step: float = GRID_STEP, target: float | None = None,
                        weights: Sequence[float] | np.ndarray | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` of ``delta`` after each case (running intersection; ends rounded
    outwards to the grid of ``step``): every ``delta <= low`` and ``>= high`` has been
    excluded; ``target`` and ``weights`` as :func:`bets`."""
    k = int(round(2.0 / step))
    grid = np.linspace(-1.0, 1.0, k + 1)
    up, down = log_capitals(diffs, grid, alpha, target, weights)
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
