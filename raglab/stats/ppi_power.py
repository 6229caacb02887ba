"""The minimum detectable effect (MDE) of a prediction-powered difference.

The MDE is the smallest true difference (from 0) whose interval, computed as
:func:`raglab.stats.ppi.ppi_mean` computes it, excludes 0 with probability ``power`` (80%):
the power figure beside a human-scale difference. It belongs to its interval, so it is
planned from what the interval uses.

- The score interval (:mod:`raglab.stats.ppi_score`) takes the variance under each
  hypothesised value; its MDE does too (:func:`score_mde`). A true difference ``theta`` is
  planned as the labels' rectifier ``R = Y - lam f`` with mass moved to make its mean
  ``theta`` (:func:`moved`): from the far end of the values the labels showed to the end
  on ``theta``'s side (the extension point of the score interval's support where it lies
  beyond them), the farthest values first; for a paired pass/fail difference, losses turn
  into gains while there are any, so the changed share is ``max(observed, theta)``, as
  :func:`raglab.stats.score.mcnemar_mde` plans a pass/fail row. Its estimate is about
  normal with ``s_1(theta)^2 = V_theta / n + lam^2 var_U(f) / M``; the interval excludes 0
  when the estimate passes the boundary ``c`` at which data moved to ``c`` give the score
  statistic of 0, ``c / sqrt(V_0 / n + lam^2 var_U(f) / M)``, the value ``z_{1 -
  alpha/2}`` (``V_0``: the variance of those data restricted to mean 0, as the interval
  computes it, :func:`raglab.stats.ppi_score.restricted`). The MDE on a side is the
  ``theta`` with ``theta - z_power s_1(theta) = c``; the MDE is the larger of the two
  sides' (None when a side cannot reach it within the range). Where the labels did not
  vary the variance comes from the hypothesised difference, not the observed 0: ``n``
  labelled pairs with no change give ``c = z^2 / n`` and ``theta - z_power sqrt(theta (1 -
  theta) / n) = c`` (0.276 at n = 20, not 0).
- Any other interval (Hall's, ``clt``; a stratified sample's): from its half-width ``h``,
  the larger of its two sides, ``h (z_{1 - alpha/2} + z_power) / z_{1 - alpha/2}``
  (:func:`interval_mde`): ``(z + z_power) se`` for the normal interval ``+- z se``.

Measured power at the MDE: ``docs/labels-statistics.md``.
"""

from __future__ import annotations

import math

import numpy as np

from raglab.stats.ppi_score import _TOL, restricted

POWER = 0.8


def _zs(alpha: float, power: float) -> tuple[float, float]:
    from scipy.special import ndtri

    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), not {power!r}")
    return float(ndtri(1.0 - alpha / 2.0)), float(ndtri(power))


def interval_mde(estimate: float, ci_low: float, ci_high: float, alpha: float,
                 power: float = POWER) -> float:
    """The MDE of an interval around ``estimate`` (module docstring): its larger half-width
    times ``(z_{1 - alpha/2} + z_power) / z_{1 - alpha/2}``."""
    z, zb = _zs(alpha, power)
    h = max(estimate - ci_low, ci_high - estimate, 0.0)
    return h * (z + zb) / z


def moved(vals: np.ndarray, counts: np.ndarray, mu: float, ends: tuple[float, float]
          ) -> tuple[np.ndarray, np.ndarray, float] | None:
    """The planned distribution of the rectifier with mean ``mu`` (module docstring):
    the observed one (``vals`` with ``counts``) with mass moved from its far end to the
    end on ``mu``'s side (the extension point ``ends`` gives there when it lies beyond the
    values, as the score interval's support has it), the farthest values first, until the
    mean is ``mu``: ``(support, probabilities, variance about mu)``; None beyond reach."""
    n = float(counts.sum())
    p = counts / n
    sup = np.asarray(vals, dtype=np.float64)
    need = mu - float((p * sup).sum())
    if abs(need) <= _TOL * max(1.0, abs(mu)):
        return sup, p, float((p * (sup - mu) ** 2).sum())
    side = 1.0 if need > 0 else -1.0
    e = ends[1] if side > 0 else ends[0]
    if side * (e - (sup.max() if side > 0 else sup.min())) > _TOL:
        sup, p = np.append(sup, e), np.append(p, 0.0)
    top = int(np.argmax(side * sup))
    for j in np.argsort(side * sup):
        if j == top or abs(need) <= _TOL:
            break
        gain = sup[top] - sup[j]
        take = min(float(p[j]), need / gain)
        p[j] -= take
        p[top] += take
        need -= take * gain
    if abs(need) > _TOL * max(1.0, abs(mu)):
        return None
    keep = p > 0.0
    order = np.argsort(sup[keep])
    sup, p = sup[keep][order], p[keep][order]
    return sup, p, float((p * (sup - mu) ** 2).sum())


def score_mde(y: np.ndarray, f: np.ndarray, u: np.ndarray, lam: float, alpha: float,
              bounds: tuple[float, float], power: float = POWER,
              judge_mean: float | None = None) -> float | None:
    """The MDE of the score interval (module docstring) of the prediction-powered mean
    ``lam * mean(u) + mean(y - lam * f)`` (arguments as
    :func:`raglab.stats.ppi_score.score_interval`; ``judge_mean`` the judge's mean over
    every case, the mean of ``f`` and ``u`` together when None); None when a true
    difference within ``bounds`` cannot reach ``power`` on one side."""
    from scipy.optimize import brentq

    z, zb = _zs(alpha, power)
    a, b = float(bounds[0]), float(bounds[1])
    n, m = y.size, u.size
    if judge_mean is None:
        judge_mean = float(np.concatenate([f, u]).mean())
    vals, counts = np.unique(y - lam * f, return_counts=True)
    counts = counts.astype(np.float64)
    shift = lam * float(u.mean()) if m else 0.0
    v_u = lam * lam * float(u.var()) / m if m > 1 else 0.0
    ends = (a - lam * judge_mean, b - lam * judge_mean)
    lo_t = max(a, min(ends[0], float(vals.min())) + shift)
    hi_t = min(b, max(ends[1], float(vals.max())) + shift)

    def planned(theta: float) -> tuple[np.ndarray, np.ndarray, float] | None:
        return moved(vals, counts, theta - shift, ends)

    def z0(c: float) -> float:
        """The score statistic of 0 on data whose estimate is ``c``."""
        got = planned(c)
        if got is None:
            return math.copysign(math.inf, c)
        sup, p, _ = got
        at0 = restricted(sup, p, -shift, ends)
        if at0 is None:
            return math.copysign(math.inf, c)
        var = at0[2] / n + v_u
        return c / math.sqrt(var) if var > 0.0 else math.copysign(math.inf, c)

    def sd1(theta: float) -> float:
        got = planned(theta)
        return math.inf if got is None else math.sqrt(max(got[2], 0.0) / n + v_u)

    eps = 1e-9 * (b - a)

    def one_side(side: float, edge: float) -> float | None:
        if side * edge <= 0.0:
            return None
        edge_in = edge - side * eps
        if side * z0(edge_in) < z:
            return None             # even the range's end is not told apart from 0
        c = float(brentq(lambda t: side * z0(t) - z, side * eps, edge_in, xtol=1e-10))

        def gap(theta: float) -> float:
            return side * (theta - c) - zb * sd1(theta)

        if gap(edge_in) < 0.0:
            return None
        if gap(c) >= 0.0:
            return abs(c)
        return abs(float(brentq(gap, c, edge_in, xtol=1e-10)))

    up, down = one_side(1.0, hi_t), one_side(-1.0, lo_t)
    return None if up is None or down is None else max(up, down)
