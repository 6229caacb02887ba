"""Paired pass/fail comparisons: Tango's score interval and test, and the power of McNemar's
exact test.

A pass/fail metric compared over ``n`` paired cases is summarised by its discordant pairs:
``g`` cases the candidate gained (baseline 0, candidate 1) and ``lost`` it lost (1, 0); the
difference is ``delta = (g - lost) / n``. Under ``H0: delta = d0`` Tango's score statistic is

    Z(d0) = (g - lost - n d0) / sqrt(n (2 p~ + d0 (1 - d0)))

where ``p~`` is the restricted maximum-likelihood estimate of the loss probability under
``H0`` (Tango 1998, Stat Med 17:891-908; Nam 1997), the root of ``2n p^2 + B p + C`` with
``B = -g - lost + (2n - g + lost) d0`` and ``C = -lost d0 (1 - d0)``. The interval is every ``d0``
with ``|Z(d0)| < z_{1 - alpha/2}``; ``Z`` decreases in ``d0`` (Tango 1998, appendix), so
each limit is one root, found by bisection on ``[-1, 1]``, for many rows at once. Because
the variance comes from the hypothesised difference rather than the observed one, the
interval is not ``[0, 0]`` when no case changed (it is ``+-z^2 / (n + z^2)``), and both of
its ends move when every change goes one way. Fagerland, Lydersen and Laake (2014, Stat Med
33:2850) recommend it for the paired difference of proportions.

The counts may be fractional: weighted cases use effective counts (``weighted_counts``,
from the design effect of the discordance), and graded shares in ``[0, 1]`` their gain and
loss mass (a bound, since ``E d^2 <= E |d|`` for ``|d| <= 1``; in units of a scale that
shrinks with the size of the changes: :mod:`raglab.stats.bound`).

Power (``mcnemar_mde``): the exact power of the two-sided exact McNemar test, summed over
the binomial number of discordant pairs, and the smallest difference it detects with 80%
power, planned at the discordance ``max(observed, delta)``: the variance under the
alternative, never the observed variance alone, which is 0 when nothing changed.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

_BISECT = 60       # halvings of [-1, 1]: below 1e-17, past double precision of a share


def restricted_loss_rate(g, lost, n, d0):
    """Tango's restricted MLE of the loss probability at ``delta = d0`` (arrays broadcast)."""
    g, lost, n, d0 = (np.asarray(x, dtype=np.float64) for x in (g, lost, n, d0))
    A = 2.0 * n
    B = -g - lost + (2.0 * n - g + lost) * d0
    C = -lost * d0 * (1.0 - d0)
    disc = np.maximum(B * B - 4.0 * A * C, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.maximum((np.sqrt(disc) - B) / (2.0 * A), 0.0)


def score_z(g, lost, n, d0):
    """Tango's score statistic ``Z(d0)`` (0 where its variance is 0 and so is its
    numerator: no evidence either way; +-inf where only the variance is 0)."""
    g, lost, n, d0 = (np.asarray(x, dtype=np.float64) for x in (g, lost, n, d0))
    p = restricted_loss_rate(g, lost, n, d0)
    num = g - lost - n * d0
    var = n * (2.0 * p + d0 * (1.0 - d0))
    tol = 1e-12 * np.maximum(n, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = num / np.sqrt(np.maximum(var, 0.0))
        flat = np.where(np.abs(num) <= tol, 0.0, np.sign(num) * np.inf)
    return np.where(var > tol * tol, z, flat)


def score_interval(g, lost, n, confidence: float = 0.95):
    """Tango's ``confidence`` interval of ``delta`` for each row: ``(low, high)`` arrays.
    NaN where ``n == 0``."""
    from scipy.special import ndtri

    g, lost, n = (np.atleast_1d(np.asarray(x, dtype=np.float64)) for x in (g, lost, n))
    g, lost, n = np.broadcast_arrays(g, lost, n)
    z = float(ndtri(1.0 - (1.0 - confidence) / 2.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        est = np.where(n > 0, (g - lost) / np.where(n > 0, n, 1.0), 0.0)

    def root(level: float, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        # Z decreases in d0: the root of Z(d0) = level lies where the sign changes
        for _ in range(_BISECT):
            mid = (lo + hi) / 2.0
            above = score_z(g, lost, n, mid) > level
            lo = np.where(above, mid, lo)
            hi = np.where(above, hi, mid)
        return (lo + hi) / 2.0

    low = root(z, np.full_like(est, -1.0), est.copy())
    high = root(-z, est.copy(), np.full_like(est, 1.0))
    # the ends of [-1, 1] are limits when Z does not reach the level before them
    low = np.where(score_z(g, lost, n, -1.0 + 1e-15) <= z, -1.0, low)
    high = np.where(score_z(g, lost, n, 1.0 - 1e-15) >= -z, 1.0, high)
    bad = ~(n > 0)
    return np.where(bad, np.nan, low), np.where(bad, np.nan, high)


def score_pvalue(g, lost, n, d0, side: str):
    """One-sided score-test p-values at ``delta = d0``: ``less`` tests ``H0: delta >= d0``
    against ``delta < d0`` (``Phi(Z)``), ``greater`` the mirror (``Phi(-Z)``)."""
    from scipy.special import ndtr

    z = score_z(g, lost, n, d0)
    if side == "less":
        return ndtr(z)
    if side == "greater":
        return ndtr(-z)
    raise ValueError(f"side must be less or greater, got {side!r}")


def weighted_counts(gain, loss, w):
    """Effective ``(g, lost, n)`` of weighted paired cases: the weighted shares of gains and
    losses times an effective sample size ``n*``, the smaller of Kish's ``(sum w)^2 / sum
    w^2`` and the design effect of the discordance, ``n* = sum w * sum w c / sum w^2 c``
    with ``c = gain + loss`` each case's changed mass: the ``n*`` for which the score
    statistic's variance at ``delta = 0``, ``(g + lost) / n*^2``, is the variance of the
    weighted difference when each change's sign is a coin flip, ``sum w^2 c / (sum w)^2``
    (an upper bound of ``sum w^2 d^2 / (sum w)^2`` for graded changes, ``|d| <= 1``, as
    the unweighted score bound is). Where every change sits in cases of one weight
    ``w_c`` (and Kish's figure is larger), ``g`` and ``lost`` are the changed counts (mass)
    themselves and ``n* = sum w / w_c``. Kish's figure alone cannot see changes sitting
    in heavily weighted cases; the design effect of the *difference* at the estimate
    (used before) counts a one-sided run of heavy changes as more than it is (8 gains in
    4x cases read as 8.27), which made the interval under-cover (93.7% at n = 200).
    Equal weights give the unweighted counts exactly. Arrays of one column each:
    ``gain``, ``loss`` (0/1, or the mass gained and lost of a graded share, per case) and
    ``w`` (weights > 0)."""
    w = np.asarray(w, dtype=np.float64)
    gain = np.asarray(gain, dtype=np.float64)
    loss = np.asarray(loss, dtype=np.float64)
    if w.size and (w == w[0]).all():
        return float(gain.sum()), float(loss.sum()), float(w.size)
    total = w.sum()
    kish = total * total / (w * w).sum()
    gs = float((w * gain).sum() / total)
    ls = float((w * loss).sum() / total)
    c = gain + loss
    spread = float((w * w * c).sum())
    n_star = kish if spread <= 0 else min(kish, total * float((w * c).sum()) / spread)
    return n_star * gs, n_star * ls, n_star


# ---- power of the exact McNemar test --------------------------------------------------------
@lru_cache(maxsize=64)
def _critical(m_max: int, alpha: float) -> np.ndarray:
    """For every number of discordant pairs ``m <= m_max``: the largest count ``c`` with
    ``P(X <= c) <= alpha / 2`` for ``X ~ Bin(m, 1/2)`` (-1 when there is none): the exact
    McNemar test rejects when the smaller of gains and losses is at most it."""
    from scipy.stats import binom

    m = np.arange(m_max + 1)
    c = binom.ppf(alpha / 2.0, m, 0.5)           # smallest c with cdf >= alpha/2
    c = np.where(np.isnan(c), 0, c).astype(np.int64)
    c = np.where(binom.cdf(c, m, 0.5) <= alpha / 2.0 * (1 + 1e-12), c, c - 1)
    return c


def mcnemar_power(n: int, psi: float, delta: float, alpha: float) -> float:
    """Exact power of the two-sided exact McNemar test at level ``alpha`` over ``n`` pairs
    whose discordance probability is ``psi`` and difference ``delta`` (``|delta| <= psi``)."""
    from scipy.stats import binom

    if n <= 0 or psi <= 0:
        return 0.0
    psi = min(psi, 1.0)
    q = min(max((psi + abs(delta)) / (2.0 * psi), 0.0), 1.0)   # P(gain | discordant)
    lo_m, hi_m = binom.ppf([1e-12, 1.0 - 1e-12], n, psi)
    m = np.arange(int(lo_m), int(hi_m) + 1)
    crit = _critical(n, alpha)[m]
    ok = crit >= 0
    reject = np.where(ok, binom.sf(m - crit - 1, m, q) + binom.cdf(crit, m, q), 0.0)
    return float((binom.pmf(m, n, psi) * np.minimum(reject, 1.0)).sum())


def normal_mde(n, discordance, alpha: float, power: float = 0.8):
    """The normal-approximation counterpart of :func:`mcnemar_mde` for many rows at once
    (Connor 1987): the smallest ``delta`` with ``delta sqrt(n) >= z_{1-alpha/2} sqrt(psi) +
    z_power sqrt(psi - delta^2)``, ``psi = max(discordance, delta)``; NaN where even
    ``delta = 1`` falls short. Used for graded shares, whose changed mass takes a new value
    in almost every row (the exact sum would cost tens of milliseconds a row)."""
    from scipy.special import ndtri

    n = np.asarray(n, dtype=np.float64)
    disc = np.asarray(discordance, dtype=np.float64)
    za, zb = float(ndtri(1 - alpha / 2)), float(ndtri(power))

    def gap(d):
        psi = np.maximum(disc, d)
        return d * np.sqrt(n) - za * np.sqrt(psi) - zb * np.sqrt(np.maximum(psi - d * d, 0.0))

    lo, hi = np.zeros_like(disc), np.ones_like(disc)
    for _ in range(50):
        mid = (lo + hi) / 2.0
        ok = gap(mid) >= 0
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    return np.where(gap(np.ones_like(disc)) >= 0, hi, np.nan)


@lru_cache(maxsize=4096)
def mcnemar_mde(n: int, discordance: float, alpha: float, power: float = 0.8) -> float | None:
    """The smallest difference ``delta > 0`` that the two-sided exact McNemar test at
    ``alpha`` detects with probability ``power`` over ``n`` pairs, planned at the
    discordance ``max(discordance, delta)`` (a difference of ``delta`` needs at least that
    share of changed cases). None when even ``delta = 1`` (every case gained) is not
    detected that often (too few cases)."""
    def pw(d: float) -> float:
        return mcnemar_power(n, max(discordance, d), d, alpha)

    if n <= 0 or pw(1.0) < power:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2.0
        if pw(mid) >= power:
            hi = mid
        else:
            lo = mid
    return hi
