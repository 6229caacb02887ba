"""Prediction-powered inference (PPI and PPI++) for the mean of a metric on the human scale.

The design raglab uses: a judge scored every one of a run's ``N`` cases (``judge_all``), and
people labelled a simple random sample of ``n`` of them (``human``, with the judge's values
on the same cases, ``judge_labelled``). The target is the mean people would give, ``E[Y]``,
over the population the cases stand for (the same target as every interval of
``raglab compare``).

The estimator is the one of Angelopoulos, Bates, Fannjiang, Jordan and Zrnic (Science 2023)
with the power tuning of Angelopoulos, Duchi and Zrnic (PPI++, 2023), computed exactly as
their reference implementation ``ppi_py`` computes ``ppi_mean_pointestimate`` and
``ppi_mean_ci``. Its "unlabelled data" are the ``M = N - n`` cases nobody labelled (the
labelled cases are removed from ``judge_all``: it holds them, by the interface); the
random sample makes them independent of the labelled ones, as the method assumes:

    theta = lam * mean_U(f) + mean_L(Y - lam * f)
    se^2  = lam^2 var_U(f) / M + var_L(Y - lam * f) / n        (variances with 1/count)
    lam   = cov_L(Y, f) / ((1 + n / M) var_LU(f)),  clipped to [0, 1]

``cov_L`` divides by ``n``, ``var_LU`` is the judge's variance over all ``N`` cases with
``N - 1`` (``numpy.cov``), as in ``ppi_py._calc_lam_glm`` (``clip=True``); the interval is
``theta +- z_{1 - alpha/2} se`` (``statsmodels``' ``_zconfint_generic``). ``lam = 1`` is
classic PPI, ``lam = 0`` the labels alone (``se = sd_L(Y) / sqrt(n)``, ``ppi_py``'s
``classical_mean_ci``). Clipping to ``[0, 1]`` means a judge that disagrees with people is
ignored rather than used backwards, and the estimate never leans on the judge more than
classic PPI. Where ``ppi_py`` is undefined raglab says what it does: with every case
labelled (``M = 0``) the estimate is the labels' mean (``lam = 0``); a judge that gave every
case the same value carries no information (``lam = 0``; ``ppi_py`` gives NaN).

With power tuning the variance at the best ``lam`` is ``var(Y) / n * (1 - rho^2 M / N)``
(``rho``: the correlation of human and judge), never above the labels alone: the
effective sample size ``n_effective = n * (se_labels / se)^2`` says how many labels alone
would give the same precision (at most ``N``, every case labelled).

The interval (``interval``):

- ``auto`` (the default): ``score`` where the human values lie on a scale (at most
  ``ppi_score.SCALE_MAX`` distinct values: pass/fail, yes/partial/no, paired differences of
  either) and ``bounds`` are given, else ``hall``. A stratified sample gets ``hall``.
- ``score``: the score interval of :mod:`raglab.stats.ppi_score` (Tango's, generalised:
  the variance under each hypothesised mean).
- ``clt``: ``ppi_py``'s, ``theta +- z_{1 - alpha/2} se`` with the variances above (divided
  by the count); exact against ``ppi_py`` to 1e-9 (``tests/stats/test_ppi.py``). With 30-60
  labels it under-covers (89-94% at 95% in raglab's simulations).
- ``hall``: the same estimate and ``lam``; variances with ``count - 1``, a Student t
  quantile with ``n - 1`` degrees of freedom, and Hall's (1992) transformation that removes
  the skewness of the studentized estimate, ``g(T) = T + a T^2 + a^2 T^3 / 3 + b`` with
  ``a = skew / 3``, ``b = skew / 6`` and ``skew = k3 / se^3`` the estimate's own skewness
  (``k3 = lam^3 m3_U / M^2 + m3_L(Y - lam f) / n^2``, third central moments; Zhou and Dinh
  2005 use this expansion for two samples). The interval is ``[theta - se g^-1(q), theta -
  se g^-1(-q)]``; ``g`` is increasing, so it always exists.

Measured coverage of each: ``docs/labels-statistics.md``.

A paired difference of two runs is the same estimator on per-case differences (candidate
minus baseline, human and judge alike) over the cases both runs share, labelled in both.

Stratified samples (:func:`ppi_stratified`): each stratum's estimate with its own ``lam``,
combined with weights ``N_h / N``: ``var = sum (N_h / N)^2 var_h``, ``k3 = sum (N_h / N)^3
k3_h`` and Satterthwaite's degrees of freedom. A stratum with fewer than ``min_labels``
labels is refused (:class:`TooFewLabels`).

Planning (``raglab label --plan``): :mod:`raglab.stats.ppi_plan`. The minimum detectable
effect of an estimate's interval (``power``): :mod:`raglab.stats.ppi_power`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

#: fewest labels an estimate (or a stratum of one) rests on; fewer is refused
MIN_LABELS = 10


class TooFewLabels(ValueError):
    """Too few human labels for a prediction-powered estimate (names the stratum, if any)."""


@dataclass(frozen=True)
class PPIEstimate:
    estimate: float        # the prediction-powered (human-scale) estimate
    ci_low: float
    ci_high: float
    se: float
    lam: float             # the power-tuning weight used (1.0 = classic PPI)
    n_labelled: int
    n_all: int             # cases the judge scored
    judge_mean: float      # the judge's plain mean over all cases
    labelled_only_se: float  # s.e. of the labels-only mean (for the effective sample size)
    n_effective: float     # n_labelled * (labelled_only_se / se) ** 2
    interval: str = "hall"  # the interval it got: score, hall or clt
    #: the smallest true difference from 0 its interval excludes 0 at with probability
    #: ``power`` (raglab.stats.ppi_power); None unless asked for, or out of reach
    mde: float | None = None


def _z(alpha: float) -> float:
    from scipy.special import ndtri

    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), not {alpha!r}")
    return float(ndtri(1.0 - alpha / 2.0))


def _floats(x, what: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64).reshape(-1)
    if not np.isfinite(a).all():
        raise ValueError(f"{what}: every value must be a finite number")
    return a


def _unlabelled(judge_labelled: np.ndarray, judge_all: np.ndarray) -> np.ndarray:
    """``judge_all`` without the labelled cases (a multiset difference); ValueError when
    ``judge_all`` does not hold every value of ``judge_labelled``."""
    vals, counts = np.unique(judge_all, return_counts=True)
    lv, lc = np.unique(judge_labelled, return_counts=True)
    idx = np.searchsorted(vals, lv)
    ok = (idx < vals.size)
    ok[ok] = vals[idx[ok]] == lv[ok]
    if not ok.all() or (counts[idx] < lc).any():
        raise ValueError("judge_all must hold the judge's value of every case, the labelled "
                         "ones included: it lacks some of judge_labelled")
    counts = counts.copy()
    counts[idx] -= lc
    return np.repeat(vals, counts)


@dataclass(frozen=True)
class _Parts:
    y: np.ndarray           # human labels
    f: np.ndarray           # judge on the labelled cases
    u: np.ndarray           # judge on the unlabelled cases
    n_all: int
    judge_mean: float
    rect_mean: float = math.nan  # mean of human - lam * judge over the labels (one stratum)


def _parts(human, judge_labelled, judge_all, min_labels: int, where: str = "",
           bounds: tuple[float, float] | None = None) -> _Parts:
    y = _floats(human, "human")
    if bounds is not None and y.size:
        tol = 1e-9 * (bounds[1] - bounds[0])
        if y.min() < bounds[0] - tol or y.max() > bounds[1] + tol:
            raise ValueError(f"{where}human values must lie within bounds {bounds!r}")
    f = _floats(judge_labelled, "judge_labelled")
    a = _floats(judge_all, "judge_all")
    if y.size != f.size:
        raise ValueError(f"human ({y.size}) and judge_labelled ({f.size}) must be the same "
                         "cases")
    if y.size < max(min_labels, 2):
        raise TooFewLabels(f"{where}{y.size} label{'s' if y.size != 1 else ''}: a "
                           f"prediction-powered estimate needs at least {max(min_labels, 2)}")
    if a.size < y.size:
        raise ValueError(f"judge_all ({a.size} cases) must hold the labelled ones "
                         f"({y.size})")
    return _Parts(y, f, _unlabelled(f, a), int(a.size), float(a.mean()))


def _power_tuned_lam(p: _Parts) -> float:
    """``ppi_py``'s power-tuning ``lam`` for a mean (``_calc_lam_glm``, ``clip=True``)."""
    n, m = p.y.size, p.u.size
    if m == 0:
        return 0.0
    cov = float(((p.y - p.y.mean()) * (p.f - p.f.mean())).sum()) * 2.0 / n
    var = float(np.cov(np.concatenate([p.f, p.u])))
    if not var > 0.0:      # a constant judge carries no information
        return 0.0
    return float(np.clip(cov / (2.0 * (1.0 + n / m) * var), 0.0, 1.0))


INTERVALS = ("auto", "score", "hall", "clt")


@dataclass(frozen=True)
class _Fit:
    """One estimate at a fixed ``lam``, with what its interval needs."""
    est: float
    var: float          # of the estimate
    k3: float           # third cumulant of the estimate (for the skewness correction)
    df: float           # degrees of freedom of the variance (t quantile)
    se_labels: float    # s.e. of the labels-only mean, same convention
    lam: float
    n: int
    n_all: int
    judge_mean: float
    rect_mean: float = math.nan  # mean of human - lam * judge over the labels (one stratum)


def _moments(x: np.ndarray, ddof: int) -> tuple[float, float]:
    """``(variance with ddof, third central moment)`` of ``x``."""
    c = x - x.mean()
    return float((c * c).sum()) / (x.size - ddof), float((c ** 3).mean())


def _fit(p: _Parts, lam: float, interval: str) -> _Fit:
    n, m = p.y.size, p.u.size
    ddof = 0 if interval == "clt" else 1
    if m == 0:      # every case labelled: the labels' mean (lam is 0 then)
        lam = 0.0
    rect = p.y - lam * p.f
    vr, k3r = _moments(rect, ddof)
    est, var, k3 = float(rect.mean()), vr / n, k3r / n ** 2
    if m:
        imputed = lam * p.u
        vu, k3u = _moments(imputed, ddof) if m > ddof else (0.0, 0.0)
        est += float(imputed.mean())
        var += vu / m
        k3 += k3u / m ** 2
    vy = _moments(p.y, ddof)[0]
    return _Fit(est, var, k3, float(n - 1), math.sqrt(vy / n), lam, n, p.n_all,
                p.judge_mean, float(rect.mean()))


def _interval(est: float, var: float, k3: float, df: float, alpha: float,
              interval: str) -> tuple[float, float]:
    se = math.sqrt(var)
    if interval == "clt":
        z = _z(alpha)
        return est - z * se, est + z * se
    from scipy.stats import t as student_t

    q = float(student_t.ppf(1.0 - alpha / 2.0, df))
    if se == 0.0:
        return est, est
    # Hall (1992): g(T) = T + a T^2 + a^2 T^3 / 3 + b, a = skew / 3, b = skew / 6, with
    # skew the estimate's own skewness k3 / se^3; g is increasing, so the interval is
    # [est - se g^-1(q), est - se g^-1(-q)]
    skew = k3 / se ** 3
    a, b = skew / 3.0, skew / 6.0

    def inverse(x: float) -> float:
        if abs(a) < 1e-12:
            return x - b
        return float((np.cbrt(1.0 + 3.0 * a * (x - b)) - 1.0) / a)

    return est - se * inverse(q), est - se * inverse(-q)


def _result(fit: _Fit, alpha: float, interval: str,
            bounds: tuple[float, float] | None = None,
            spread: Sequence[tuple[float, _Fit]] = (),
            score: tuple[float, float] | None = None) -> PPIEstimate:
    se = math.sqrt(fit.var)
    est = fit.est
    if score is not None and bounds is not None:   # in range and never a point already
        est, (lo, hi) = min(max(est, bounds[0]), bounds[1]), score
    else:
        lo, hi = _interval(est, fit.var, fit.k3, fit.df, alpha, interval)
        if bounds is not None:
            est, lo, hi = _within(est, lo, hi, se, bounds, alpha, spread or [(1.0, fit)])
    n, n_all, se_labels = fit.n, fit.n_all, fit.se_labels
    if se > 0.0:
        n_eff = min(n * (se_labels / se) ** 2, float(n_all))
    else:    # no variance left: nothing measured to gain (labels constant) or every case
        n_eff = float(n) if se_labels == 0.0 else float(n_all)
    return PPIEstimate(est, lo, hi, se, fit.lam, n, n_all, fit.judge_mean, se_labels,
                       n_eff, interval)


def _within(est: float, lo: float, hi: float, se: float, bounds: tuple[float, float],
            alpha: float, spread: Sequence[tuple[float, _Fit]]
            ) -> tuple[float, float, float]:
    """The estimate and interval of a mean known to lie in ``bounds`` (human and judge
    values alike): clipped to them (the prediction-powered estimate itself can fall
    outside, as ``lam`` times the judge's mean plus the labels' correction may), and,
    where nothing varied (``se`` 0: every labelled ``human - lam * judge`` the same and the
    judge constant elsewhere, so a variance-based interval has no width), the exact bound
    instead. With ``n`` labelled values all equal to ``c``, the share of the population
    whose value differs is below ``1 - (alpha / 2) ** (1 / n)`` (Clopper-Pearson, each
    side), and each such case moves the mean of ``human - lam * judge`` at most to an end
    of its range ``[lo - lam * hi, hi - lam * lo]``. ``spread``: ``(weight, fit)`` per
    stratum (Bonferroni over the strata). An estimate outside the range moves to its end
    and the interval with it (its two half-widths kept), so the interval always holds the
    reported estimate."""
    a, b = bounds
    clipped = min(max(est, a), b)
    lo, hi = lo + clipped - est, hi + clipped - est
    est = clipped
    if se <= 1e-12 * max(abs(a), abs(b), 1.0):
        k = len(spread)
        down = up = 0.0
        for w, f in spread:
            share = 1.0 - (alpha / (2.0 * k)) ** (1.0 / f.n)
            down += w * share * max(f.rect_mean - (a - f.lam * b), 0.0)
            up += w * share * max((b - f.lam * a) - f.rect_mean, 0.0)
        lo, hi = est - down, est + up
    return est, max(a, lo), min(b, hi)


def _check(alpha: float, interval: str, bounds: tuple[float, float] | None) -> None:
    """The arguments every estimate shares; the human values are checked against
    ``bounds`` by :func:`_parts`."""
    _z(alpha)
    if interval not in INTERVALS:
        raise ValueError(f"interval must be one of {', '.join(INTERVALS)}, not {interval!r}")
    if bounds is not None and not (math.isfinite(bounds[0]) and math.isfinite(bounds[1])
                                   and bounds[0] < bounds[1]):
        raise ValueError(f"bounds must be two finite numbers, low < high, not {bounds!r}")


def ppi_mean(human, judge_labelled, judge_all, *, alpha: float = 0.05,
             lam: float | None = None, min_labels: int = MIN_LABELS,
             interval: str = "auto", bounds: tuple[float, float] | None = None,
             power: float | None = None) -> PPIEstimate:
    """The prediction-powered estimate of the human-scale mean with its ``1 - alpha``
    interval. ``human`` and ``judge_labelled``: the labelled cases (same order);
    ``judge_all``: the judge's value of every case it scored, the labelled ones included.
    ``lam`` None: power-tuned (PPI++, clipped to [0, 1]); else that fixed weight (1: classic
    PPI). ``interval``: ``auto`` (the default), ``score``, ``hall`` or ``clt`` (module
    docstring; ``score`` needs ``bounds``). ``bounds``: the range the human values (and so
    the mean) lie in, ``(0, 1)`` for a metric, ``(-1, 1)`` for a paired difference of one:
    the interval is clipped to it, and where the labels did not vary it is the exact bound
    (:func:`_within`) instead of an interval of no width. ``power``: also the minimum
    detectable effect of that interval (``mde``, :mod:`raglab.stats.ppi_power`).
    :class:`TooFewLabels` below ``min_labels`` labels (and below 2 always)."""
    _check(alpha, interval, bounds)
    p = _parts(human, judge_labelled, judge_all, min_labels, bounds=bounds)
    if lam is not None and not math.isfinite(lam):
        raise ValueError(f"lam must be a finite number, not {lam!r}")
    used = _power_tuned_lam(p) if lam is None else float(lam)
    method = interval_of(p.y, interval, bounds)
    fit = _fit(p, used, "hall" if method == "score" else method)
    score = None
    if method == "score" and bounds is not None:
        from raglab.stats.ppi_score import score_interval

        score = score_interval(p.y, p.f, p.u, fit.lam, p.judge_mean, alpha, bounds)
    out = _result(fit, alpha, method, bounds, score=score)
    if power is None:
        return out
    from raglab.stats.ppi_power import interval_mde, score_mde

    if score is not None and bounds is not None:
        mde = score_mde(p.y, p.f, p.u, fit.lam, alpha, bounds, power, p.judge_mean)
    else:
        mde = interval_mde(out.estimate, out.ci_low, out.ci_high, alpha, power)
    return replace(out, mde=mde)


def interval_of(human: np.ndarray, interval: str, bounds: tuple[float, float] | None
                ) -> str:
    """The interval ``interval`` resolves to for a simple random sample (``auto``: module
    docstring)."""
    if interval == "score" and bounds is None:
        raise ValueError("the score interval needs bounds (the range of the human values)")
    if interval != "auto":
        return interval
    from raglab.stats.ppi_score import on_a_scale

    return "score" if bounds is not None and on_a_scale(human) else "hall"


def ppi_stratified(strata: Mapping[str, tuple[Sequence[float], Sequence[float],
                                              Sequence[float]]],
                   population: Mapping[str, int], *, alpha: float = 0.05,
                   min_labels: int = MIN_LABELS, interval: str = "auto",
                   bounds: tuple[float, float] | None = None,
                   power: float | None = None) -> PPIEstimate:
    """The prediction-powered estimate from a stratified sample: ``strata`` maps each
    stratum to ``(human, judge_labelled, judge_all)`` as :func:`ppi_mean` takes them, and
    ``population`` each stratum to its number of cases ``N_h`` (for a metric that applies
    to some cases only, the cases where it applies). Each stratum gets its own power-tuned
    ``lam``; the estimates combine with weights ``N_h / N``. ``lam`` in the result is the
    weighted mean of the strata's; ``labelled_only_se`` that of the stratified mean of the
    labels alone. ``bounds`` and ``power`` as for :func:`ppi_mean` (the MDE here is the
    interval's, :func:`raglab.stats.ppi_power.interval_mde`); ``interval`` ``auto`` is
    ``hall`` here. :class:`TooFewLabels` names a stratum with fewer than ``min_labels``."""
    _check(alpha, interval, bounds)
    if interval == "score":
        raise ValueError("the score interval is for a simple random sample; a stratified "
                         "one gets hall (or clt)")
    interval = "hall" if interval == "auto" else interval
    if set(strata) != set(population):
        missing = sorted(set(population) ^ set(strata))
        raise ValueError(f"strata and population must name the same strata (differ in: "
                         f"{', '.join(map(str, missing))})")
    if not strata:
        raise ValueError("no stratum given")
    sizes = {h: int(population[h]) for h in population}
    if any(s <= 0 for s in sizes.values()):
        bad = next(h for h, s in sizes.items() if s <= 0)
        raise ValueError(f"stratum {bad!r}: population must be a positive count")
    total = float(sum(sizes.values()))
    fits = []
    for h in sorted(strata, key=str):
        human, judge_labelled, judge_all = strata[h]
        p = _parts(human, judge_labelled, judge_all, min_labels, where=f"stratum {h!r}: ",
                   bounds=bounds)
        fits.append((sizes[h] / total, _fit(p, _power_tuned_lam(p), interval)))
    var = sum((w * w) * f.var for w, f in fits)
    # Satterthwaite's degrees of freedom of the combined variance (each stratum n_h - 1)
    parts = sum(((w * w) * f.var) ** 2 / f.df for w, f in fits)
    df = var * var / parts if parts > 0 else sum(f.df for _, f in fits)
    combined = _Fit(est=sum(w * f.est for w, f in fits), var=var,
                    k3=sum(w ** 3 * f.k3 for w, f in fits), df=df,
                    se_labels=math.sqrt(sum((w * f.se_labels) ** 2 for w, f in fits)),
                    lam=sum(w * f.lam for w, f in fits), n=sum(f.n for _, f in fits),
                    n_all=sum(f.n_all for _, f in fits),
                    judge_mean=sum(w * f.judge_mean for w, f in fits))
    out = _result(combined, alpha, interval, bounds, fits)
    if power is None:
        return out
    from raglab.stats.ppi_power import interval_mde

    return replace(out, mde=interval_mde(out.estimate, out.ci_low, out.ci_high, alpha, power))
