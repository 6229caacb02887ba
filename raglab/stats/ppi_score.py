"""The score interval of a prediction-powered mean whose human labels lie on a scale.

A pass/fail label (or yes / partial / no) and the paired difference of two such labels take
a few values, and with 30-60 labels most of them are the common one: the rectifier
``human - lam * judge`` has few values away from its mode, its variance estimated from the
labels is small exactly when the labels happen to miss the rarer values, and a
variance-based interval then misses the truth more often than it says (a paired pass/fail
difference with 30-60 labelled pairs: 91-94% at a nominal 95%). Tango (1998) fixed the
same fault of the paired difference of proportions with a score interval: the variance
under each hypothesised value instead of the observed one. This is that interval for the
prediction-powered mean.

For a hypothesised human-scale mean ``theta`` the labelled rectifier ``R = Y - lam f`` must
have mean ``mu = theta - lam * mean_U(f)``. Its distribution is taken as the maximum-
likelihood one with that mean on its support: the values the labels showed, plus, beyond
them, the value a case with an extreme human value no label showed would have at the
judge's mean, ``lo - lam * mean(f)`` and ``hi - lam * mean(f)`` (``bounds = (lo, hi)``, the
range of the human values). That maximum (a multinomial's, with a mean constraint) is the
empirical likelihood's tilt ``p_j = n_j / (n (1 + t (r_j - mu)))`` when ``mu`` is inside
what the labels showed and the labels alone can carry it; otherwise it puts the missing
mass ``w`` on the extension point ``e`` on ``mu``'s side and keeps the labels' values in
proportion, ``p_j = n_j (mu - e) / (n (r_j - e))`` (the Karush-Kuhn-Tucker conditions of
the problem: an unseen value gets mass only at the end of the support). The statistic is

    Z(theta) = (estimate - theta) / sqrt(V_mu(R) / n + lam^2 var_U(f) / M)

with ``V_mu`` the variance of that distribution (the judge's unlabelled mean, over
hundreds of cases, keeps its plain variance), and the interval is every ``theta`` in the
range with ``|Z| <= z_{1 - alpha/2}`` (an estimate outside the range, reported as its end,
is tested as that end). With ``lam = 0`` and labels in ``{-1, 0, 1}`` this
is exactly Tango's interval (``raglab.stats.score``), the one compare gives a pass/fail
row; with labels in ``{0, 1}`` it is Wilson's. Where every label is the same the interval
is not a point: 35 of 35 ``yes`` give ``[35 / (35 + z^2), 1]``.

Measured coverage: ``docs/labels-statistics.md`` (``python -m tests.stats.ppi_sim``).
"""

from __future__ import annotations

import math

import numpy as np

#: human values on a scale: at most this many distinct values get the score interval
#: (pass/fail, yes/partial/no, and paired differences of either); more, Hall's
SCALE_MAX = 5
_TOL = 1e-12


def on_a_scale(human: np.ndarray) -> bool:
    """Whether the human values take few enough values for the score interval."""
    return np.unique(human).size <= SCALE_MAX


def restricted(vals: np.ndarray, counts: np.ndarray, mu: float,
               ends: tuple[float, float]
               ) -> tuple[np.ndarray, np.ndarray, float] | None:
    """The maximum-likelihood distribution with mean ``mu`` on ``vals`` (observed, with
    ``counts``, which may be fractional weights) plus the extension points ``ends`` that lie
    beyond them: ``(support, probabilities, variance about mu)``; None where no
    distribution on that support has mean ``mu``."""
    n = float(counts.sum())
    d = vals - mu
    mean = float((counts * vals).sum()) / n
    if abs(mean - mu) <= _TOL * max(1.0, abs(mu)):
        return vals, counts / n, float((counts * d * d).sum()) / n
    up = mu > mean
    e = ends[1] if up else ends[0]
    beyond = e > vals.max() + _TOL if up else e < vals.min() - _TOL
    if beyond and (e - mu) * (1.0 if up else -1.0) > 0.0:
        p = counts * (mu - e) / (n * (vals - e))
        w = 1.0 - float(p.sum())
        if w >= 0.0:
            return (np.append(vals, e), np.append(p, w),
                    float((p * d * d).sum()) + w * (e - mu) ** 2)
    if d.max() <= _TOL or d.min() >= -_TOL:
        return None               # mu outside what the support can reach
    from scipy.optimize import brentq

    def tilt(t: float) -> float:
        return float((counts * d / (1.0 + t * d)).sum())

    lo, hi = -1.0 / float(d.max()), 1.0 / float(-d.min())
    t = brentq(tilt, lo * (1.0 - 1e-12), hi * (1.0 - 1e-12), xtol=1e-15)
    p = counts / (1.0 + t * d)
    p = p / p.sum()
    return vals, p, float((p * d * d).sum())


def _restricted_variance(vals: np.ndarray, counts: np.ndarray, mu: float,
                         ends: tuple[float, float]) -> float | None:
    """The variance about ``mu`` of :func:`restricted`'s distribution (None: none)."""
    got = restricted(vals, counts, mu, ends)
    return None if got is None else got[2]


def score_interval(y: np.ndarray, f: np.ndarray, u: np.ndarray, lam: float,
                   judge_mean: float, alpha: float, bounds: tuple[float, float]
                   ) -> tuple[float, float]:
    """The ``1 - alpha`` score interval (module docstring) of the prediction-powered mean
    ``lam * mean(u) + mean(y - lam * f)``: ``y`` the labels, ``f`` the judge on the
    labelled cases, ``u`` on the others, ``judge_mean`` the judge's mean over every case,
    ``bounds`` the range of the human values (and of the mean)."""
    from scipy.optimize import brentq
    from scipy.special import ndtri

    a, b = float(bounds[0]), float(bounds[1])
    n, m = y.size, u.size
    r = y - lam * f
    vals, counts = np.unique(r, return_counts=True)
    counts = counts.astype(np.float64)
    shift = lam * float(u.mean()) if m else 0.0
    v_u = lam * lam * float(u.var()) / m if m > 1 else 0.0
    est = float(r.mean()) + shift
    ends = (a - lam * judge_mean, b - lam * judge_mean)
    reach = (min(ends[0], float(vals.min())) + shift, max(ends[1], float(vals.max())) + shift)
    lo_t, hi_t = max(a, reach[0]), min(b, reach[1])
    q = float(ndtri(1.0 - alpha / 2.0))
    # an estimate outside the range (lam * mean_U(f) + mean_L(y - lam f) can leave it) is
    # tested as the range's end it is reported as: tested as it stands, every theta in the
    # range could be rejected and the interval would be a point
    est = min(max(est, lo_t), hi_t)

    def z(theta: float) -> float:
        num = est - theta
        var = _restricted_variance(vals, counts, theta - shift, ends)
        if var is None:
            return math.copysign(math.inf, num)
        var = var / n + v_u
        if var <= 0.0:
            return 0.0 if abs(num) <= _TOL else math.copysign(math.inf, num)
        return num / math.sqrt(var)

    eps = 1e-12 * max(1.0, b - a)

    def end(level: float, edge: float) -> float:
        # Z(est) = 0 is inside the level; the end is the root between est and the edge
        if edge == est:
            return edge
        side = 1.0 if edge < est else -1.0
        outside = edge + side * eps
        if (z(outside) - level) * side <= 0.0:
            return edge         # the range's end is not rejected
        return float(brentq(lambda t: z(t) - level, min(est, outside),
                            max(est, outside), xtol=1e-12))

    return end(q, lo_t), end(-q, hi_t)
