"""The bootstrap-t (studentized bootstrap) for the weighted mean of paired differences over
units, and the one-sided tests that invert it.

Units are cases, or clusters flipped together: column ``j`` of ``U`` holds each unit's
weighted sum of differences and ``W`` its weight, the estimate is ``theta = sum U / sum W``
and its linearised standard error ``se = sqrt(n / (n - 1) sum (U - theta W)^2) / sum W``
(``sd(d) / sqrt(n)`` for unweighted cases). Each bootstrap resample of units gives
``t* = (theta* - theta) / se*``; the interval is ``[theta - q(1 - a/2) se, theta - q(a/2)
se]`` with ``q`` the quantiles of ``t*`` (Efron and Tibshirani 1993, ch. 12; Hall 1992).
Unlike the sign-flip inversion it assumes no symmetry of the differences about the
hypothesised value, so skewed graded differences (ranks, latency, cost, shares) keep their
coverage at non-zero nulls. A resample whose differences do not vary has ``se* = 0``: its
``t*`` is 0 when its estimate equals ``theta``, else infinite (which widens the interval,
and can leave a side unbounded, rather than being dropped).
"""

from __future__ import annotations

import numpy as np

from raglab.stats.resample import bootstrap_means


def _se(SU, SW, SUU, SUW, SWW, n):
    theta = SU / SW
    q = np.maximum(SUU - 2.0 * theta * SUW + theta * theta * SWW, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return theta, np.sqrt(n / max(n - 1, 1) * q) / SW


def studentized_replicates(U: np.ndarray, W: np.ndarray, n_resamples: int,
                           rng: np.random.Generator):
    """``(theta, se, t)``: the estimates, their standard errors and the ``(n_resamples,
    k)`` bootstrap-t replicates of each column."""
    n, k = U.shape
    if bool((W == 1.0).all()):     # unweighted cases: two products, the weights are counts
        sums = bootstrap_means(np.hstack([U, U * U]), n_resamples, rng) * n
        SU, SUU = sums[:, :k], sums[:, k:]
        SW = SWW = np.full_like(SU, float(n))
        SUW = SU
    else:
        sums = bootstrap_means(np.hstack([U, W, U * U, U * W, W * W]), n_resamples, rng) * n
        SU, SW, SUU, SUW, SWW = (sums[:, i * k:(i + 1) * k] for i in range(5))
    theta, se = _se(U.sum(0), W.sum(0), (U * U).sum(0), (U * W).sum(0), (W * W).sum(0), n)
    th_b, se_b = _se(SU, SW, SUU, SUW, SWW, n)
    diff = th_b - theta
    tol = 1e-9 * (np.abs(U).sum(0) / W.sum(0) + 1e-300)
    diff = np.where(np.abs(diff) <= tol, 0.0, diff)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(se_b > tol, diff / np.where(se_b > tol, se_b, 1.0),
                     np.sign(diff) * np.inf)
    return theta, se, t


def bootstrap_t_interval(theta, se, t, confidence: float):
    """``(low, high)`` of each column from its replicates ``t``; NaN on a side that the
    replicates leave unbounded. Order statistics, no interpolation (an infinite replicate
    stays infinite)."""
    B = t.shape[0]
    alpha = (1.0 - confidence) / 2.0
    s = np.sort(t, axis=0)
    lo_i = max(int(np.floor(alpha * (B + 1))) - 1, 0)
    hi_i = min(int(np.ceil((1.0 - alpha) * (B + 1))) - 1, B - 1)
    q_lo, q_hi = s[lo_i], s[hi_i]
    with np.errstate(invalid="ignore"):
        low = theta - q_hi * se
        high = theta - q_lo * se
    return np.where(np.isfinite(low), low, np.nan), np.where(np.isfinite(high), high, np.nan)


def bootstrap_t_pvalues(theta, se, t, theta0, side: str):
    """One-sided bootstrap-t p-values at ``delta = theta0``: ``less`` tests ``H0: delta >=
    theta0`` against ``delta < theta0``, ``greater`` the mirror; ``(b + 1) / (B + 1)``."""
    B = t.shape[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        T = (theta - theta0) / se
    if side == "less":
        b = (t <= T).sum(axis=0)
    elif side == "greater":
        b = (t >= T).sum(axis=0)
    else:
        raise ValueError(f"side must be less or greater, got {side!r}")
    return (b + 1.0) / (B + 1.0)
