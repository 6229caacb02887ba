"""Paired pass/fail comparisons: Tango's score interval and test, raglab's corrected form of
them (``paired_z``, ``paired_interval``, ``paired_pvalue``) and the power of its test.

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

Tango's one-sided tests away from 0 are too liberal in the regime of few changed cases: at
a true difference of ``-margin`` the 95% interval's low end passed ``-margin`` up to 3.1%
of the time and its high end fell below it up to 5.1% (exact, over n = 20..300, discordance
0.02..0.5, margins 0.02..0.1; nominal 2.5%): the count of losses is skewed and discrete.
``paired_z`` corrects the statistic for skewness (Laud 2017, Pharm Stat 16:334, as in his
``ratesci::pairbinci``) and by a continuity correction of ``CONTINUITY`` counts; both
vanish at ``d0 = 0``, where the test is McNemar's score test (the two-sided p-value of a
row). With them the worst error at the boundary is 2.38% at 2.5% (5.04% at 5%, at one
lattice point), ``tests/stats/binary_exact.py``. ``paired_interval`` inverts it: the p-value
is below ``alpha`` exactly when 0 is outside the ``1 - alpha`` interval, and a one-sided p
below ``alpha / 2`` exactly when the hypothesised value is outside on that side.

The counts may be fractional: weighted cases use effective counts (``weighted_counts``,
from the design effect of the discordance), and graded shares in ``[0, 1]`` their gain and
loss mass (a bound, since ``E d^2 <= E |d|`` for ``|d| <= 1``; in units of a scale that
shrinks with the size of the changes: :mod:`raglab.stats.bound`).

Power (``score_mde``): the exact power of that two-sided test of 0, summed over the
binomial number of discordant pairs and the gains among them, and the smallest difference it
detects with 80% power, planned at the discordance ``max(observed, delta)``: the variance
under the alternative, never the observed variance alone, which is 0 when nothing changed.
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


def _invert(zfun, g, lost, n, confidence: float):
    """The ``confidence`` interval of ``delta`` for each row: every ``d0`` where the
    statistic ``zfun`` (decreasing in ``d0``) stays inside ``+-z_{1-alpha/2}``."""
    from scipy.special import ndtri

    g, lost, n = (np.atleast_1d(np.asarray(x, dtype=np.float64)) for x in (g, lost, n))
    g, lost, n = np.broadcast_arrays(g, lost, n)
    shape = g.shape
    g, lost, n = g.ravel(), lost.ravel(), n.ravel()
    z = float(ndtri(1.0 - (1.0 - confidence) / 2.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        est = np.where(n > 0, (g - lost) / np.where(n > 0, n, 1.0), 0.0)

    # Z decreases in d0: the low end is where Z falls through +z (between -1 and the
    # estimate), the high end where it falls through -z; both bisected at once
    k = est.size
    G, L, N = (np.concatenate([x, x]) for x in (g, lost, n))
    level = np.concatenate([np.full(k, z), np.full(k, -z)])
    lo = np.concatenate([np.full(k, -1.0), est])
    hi = np.concatenate([est, np.full(k, 1.0)])
    for _ in range(_BISECT):
        mid = (lo + hi) / 2.0
        above = zfun(G, L, N, mid) > level
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    low, high = np.split((lo + hi) / 2.0, 2)
    # the ends of [-1, 1] are limits when Z does not reach the level before them
    low = np.where(zfun(g, lost, n, -1.0 + 1e-15) <= z, -1.0, low)
    high = np.where(zfun(g, lost, n, 1.0 - 1e-15) >= -z, 1.0, high)
    bad = ~(n > 0)
    return (np.where(bad, np.nan, low).reshape(shape),
            np.where(bad, np.nan, high).reshape(shape))


def score_interval(g, lost, n, confidence: float = 0.95):
    """Tango's ``confidence`` interval of ``delta`` for each row: ``(low, high)`` arrays.
    NaN where ``n == 0``."""
    return _invert(score_z, g, lost, n, confidence)


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


# ---- raglab's paired test: Tango's statistic corrected for skewness and discreteness ----
CONTINUITY = 0.45   # the continuity correction, in counts of g - lost, at |d0| >= 1 / n


def paired_z(g, lost, n, d0):
    """raglab's paired statistic at ``delta = d0`` (arrays broadcast): Tango's score
    statistic with Laud's (2017) skewness correction and a continuity correction.

    With ``V = n (2 p~ + d0 (1 - d0))`` Tango's variance and ``mu3 = n d0 (1 - 3 psi~ +
    2 d0^2)`` the third central moment of ``g - lost`` under ``H0`` (``psi~ = 2 p~ + d0``,
    the restricted discordance), the corrected statistic ``s`` solves ``s + gamma (s^2 -
    1) = Z_c`` with ``gamma = t mu3 / (6 V^{3/2})`` (Gart and Nam 1988's skewness correction
    of a score statistic, in its stable form ``s = 2 (Z_c + gamma) / (1 + sqrt(1 + 4 gamma
    (Z_c + gamma)))``, continued linearly where the square root's argument is negative),
    and ``Z_c = (g - lost - n d0 -+ c) / sqrt(V)``, the numerator moved ``c = CONTINUITY t``
    counts towards 0 (and 0 inside), where ``t = min(1, n |d0|)`` tapers both corrections
    in over the first case away from 0. At ``d0 = 0`` both vanish: the statistic is
    McNemar's ``(g - lost) / sqrt(g + lost)``. Decreasing in ``d0`` wherever ``|s| >= 0.5``
    (within 0.5 of 0 the skewness term can move it back by about 0.02), so each end of an
    interval at 40% confidence or more is one root; 0 where the variance and the numerator
    are 0, +-inf where only the variance is."""
    g, lost, n, d0 = (np.asarray(x, dtype=np.float64) for x in (g, lost, n, d0))
    p = restricted_loss_rate(g, lost, n, d0)
    num = g - lost - n * d0
    taper = np.minimum(1.0, n * np.abs(d0))    # both corrections grow from 0 at d0 = 0
    num = np.sign(num) * np.maximum(np.abs(num) - CONTINUITY * taper, 0.0)
    psi = 2.0 * p + d0
    var = n * np.maximum(psi - d0 * d0, 0.0)
    mu3 = n * d0 * (1.0 - 3.0 * psi + 2.0 * d0 * d0)
    tol = 1e-12 * np.maximum(n, 1.0)
    ok = var > tol * tol
    safe = np.where(ok, var, 1.0)
    zc = num / np.sqrt(safe)
    gamma = np.where(ok, taper * mu3 / (6.0 * safe ** 1.5), 0.0)
    t = zc + gamma
    s = 2.0 * t / (1.0 + np.sqrt(np.maximum(1.0 + 4.0 * gamma * t, 0.0)))
    with np.errstate(invalid="ignore"):
        flat = np.where(np.abs(num) <= tol, 0.0, np.sign(num) * np.inf)
    return np.where(ok, s, flat)


def paired_interval(g, lost, n, confidence: float = 0.95):
    """The ``confidence`` interval of ``delta`` that inverts :func:`paired_z`: every ``d0``
    the two-sided test at ``1 - confidence`` does not reject. ``(low, high)`` arrays, NaN
    where ``n == 0``; counts may be fractional."""
    return _invert(paired_z, g, lost, n, confidence)


def paired_pvalue(g, lost, n, d0, side: str):
    """p-values of :func:`paired_z` at ``delta = d0``: ``less`` tests ``H0: delta >= d0``
    (``Phi(s)``), ``greater`` ``H0: delta <= d0`` (``Phi(-s)``), ``two`` is twice the
    smaller. ``less`` is below ``alpha / 2`` exactly when ``d0`` is above the high end of
    the ``1 - alpha`` :func:`paired_interval`, ``two`` below ``alpha`` exactly when ``d0``
    is outside it."""
    from scipy.special import ndtr

    s = paired_z(g, lost, n, d0)
    if side == "less":
        return ndtr(s)
    if side == "greater":
        return ndtr(-s)
    if side == "two":
        return np.minimum(1.0, 2.0 * ndtr(-np.abs(s)))
    raise ValueError(f"side must be less, greater or two, got {side!r}")


def score_power(n: int, psi: float, delta: float, alpha: float) -> float:
    """Exact power of the two-sided test of ``delta = 0`` at level ``alpha`` (the row's
    p-value: McNemar's score statistic, which :func:`paired_z` is at 0) over ``n`` pairs
    whose discordance probability is ``psi`` and difference ``delta`` (``|delta| <=
    psi``): summed over the binomial number ``m`` of changed cases and the binomial gains
    among them; it rejects when ``|2 g - m| > z_{1 - alpha/2} sqrt(m)``, that is when 0 is
    outside the ``1 - alpha`` interval."""
    from scipy.special import ndtri
    from scipy.stats import binom

    if n <= 0 or psi <= 0:
        return 0.0
    psi = min(psi, 1.0)
    z = float(ndtri(1.0 - alpha / 2.0))
    q = min(max((psi + abs(delta)) / (2.0 * psi), 0.0), 1.0)   # P(gain | discordant)
    lo_m, hi_m = binom.ppf([1e-12, 1.0 - 1e-12], n, psi)
    m = np.arange(int(lo_m), int(hi_m) + 1)
    reach = z * np.sqrt(m)
    up = np.floor((m + reach) / 2.0) + 1.0       # the fewest gains with 2g - m > z sqrt(m)
    down = np.ceil((m - reach) / 2.0) - 1.0      # the most with m - 2g > z sqrt(m)
    reject = binom.sf(up - 1.0, m, q) + binom.cdf(down, m, q)
    return float((binom.pmf(m, n, psi) * np.minimum(reject, 1.0)).sum())


def normal_mde(n, discordance, alpha: float, power: float = 0.8):
    """The normal-approximation counterpart of :func:`score_mde` for many rows at once
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
def score_mde(n: int, discordance: float, alpha: float, power: float = 0.8) -> float | None:
    """The smallest difference ``delta > 0`` that the two-sided test at ``alpha``
    (:func:`score_power`) detects with probability ``power`` over ``n`` pairs, planned at
    the discordance ``max(discordance, delta)`` (a difference of ``delta`` needs at least
    that share of changed cases). None when even ``delta = 1`` (every case gained) is not
    detected that often (too few cases)."""
    def pw(d: float) -> float:
        return score_power(n, max(discordance, d), d, alpha)

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
