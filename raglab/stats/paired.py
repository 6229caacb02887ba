"""Paired comparison of two runs, metric by metric: ``paired_table`` and ``one_sided``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from raglab.stats.bound import bound_scale
from raglab.stats.resample import (
    bootstrap_interval,
    bootstrap_means,
    signflip_interval,
    signflip_pvalues_at,
    signflip_sums,
    unit_bootstrap_interval,
)
from raglab.stats.score import (
    normal_mde,
    paired_interval,
    paired_pvalue,
    score_mde,
    weighted_counts,
)
from raglab.stats.studentized import (
    bootstrap_t_interval,
    bootstrap_t_pvalues,
    studentized_replicates,
)

KINDS = ("share", "binary", "rank", "count", "latency", "cost")
DIRECTIONS = ("higher", "lower", "none")
INTERVALS = ("auto", "signflip", "bca", "percentile")
DENSE_MIN = 50      # changed units from which graded metrics get the bootstrap-t
_PLAN = 0x52414721  # the fixed seed of the tests' resample plans (sign flips, bootstrap-t)
SIDES = ("two", "less", "greater")
POWER = 0.8        # the power at which the minimum detectable effect is stated
_TIE_RTOL = 1e-12   # |cand - base| <= this x max(|cand|, |base|) is a tie (and a zero diff)
_P_FLOOR = float(np.finfo(np.float64).tiny)   # a p-value that underflows reads as this, not 0


@dataclass(frozen=True)
class PairedStat:
    """One metric x slice comparison of a candidate with a baseline over paired cases."""
    delta: float | None      # (weighted) mean(candidate - baseline) over the n paired cases
    ci_low: float | None     # paired CI of delta; None when n == 0 or unbounded
    ci_high: float | None
    p_value: float | None    # two-sided; None when n == 0
    n: int                   # cases where the metric applies in both runs (weight > 0)
    wins: int                # candidate better by the metric's direction ("none": higher)
    ties: int
    losses: int
    ci_method: str   # "signflip" | "bca" | "percentile" | "degenerate" | "unbounded" | "none"
    test: str                # "permutation" | "permutation-exact" | "score" | "none"
    mde: float | None = None     # minimum detectable effect (two-sided, 1 - confidence, 80% power)
    n_eff: float | None = None   # effective sample size: n unweighted, Kish's with weights
    units: int | None = None     # independent units: n, or the clusters among the n cases


_EMPTY = PairedStat(None, None, None, None, 0, 0, 0, 0, "none", "none")


def _check(base, cand, kinds, directions):
    base = np.asarray(base, dtype=np.float64)
    cand = np.asarray(cand, dtype=np.float64)
    if base.ndim != 2 or base.shape != cand.shape:
        raise ValueError(f"base and cand must be 2-D arrays of one shape, got {base.shape} "
                         f"and {cand.shape}")
    m = base.shape[1]
    if len(kinds) != m or len(directions) != m:
        raise ValueError(f"{m} metric columns but {len(kinds)} kinds and "
                         f"{len(directions)} directions")
    for j, (kind, direction) in enumerate(zip(kinds, directions)):
        if kind not in KINDS:
            raise ValueError(f"column {j}: unknown kind {kind!r} (one of {', '.join(KINDS)})")
        if direction not in DIRECTIONS:
            raise ValueError(f"column {j}: unknown direction {direction!r} "
                             f"(one of {', '.join(DIRECTIONS)})")
    return base, cand


def _design(n_cases: int, weights, clusters) -> tuple[np.ndarray | None, np.ndarray | None]:
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (n_cases,):
            raise ValueError(f"weights must have one value per case ({n_cases}), got "
                             f"shape {w.shape}")
        if not (np.isfinite(w).all() and (w >= 0).all()):
            raise ValueError("weights must be finite and >= 0")
    codes = None
    if clusters is not None:
        labels = np.asarray(clusters)
        if labels.shape != (n_cases,):
            raise ValueError(f"clusters must have one label per case ({n_cases}), got "
                             f"shape {labels.shape}")
        codes = np.unique(labels, return_inverse=True)[1].astype(np.int64)
    return w, codes


@dataclass
class _Group:
    """Columns whose metric applies to the same number of units, compacted: ``U`` and
    ``W`` are ``(n_units, len(cols))``."""
    cols: list[int]
    U: np.ndarray
    W: np.ndarray

    @property
    def n(self) -> int:
        return int(self.U.shape[0])


def _groups(diffs: np.ndarray, ok: np.ndarray, w: np.ndarray | None,
            codes: np.ndarray | None) -> Iterator[_Group]:
    """Each column's units (cases, or clusters of cases) with their weighted sums of
    differences ``U`` and weights ``W``, grouped by the number of units with weight, in a
    canonical order (by ``U``, then ``W``): with the fixed plans every figure of a group is
    a function of the multiset of units, never of the order of the cases."""
    n_cases, m = diffs.shape
    weight = np.where(ok, 1.0 if w is None else w[:, None], 0.0)
    contrib = np.where(ok, diffs, 0.0) * weight
    if codes is None:
        U_all, W_all = contrib, weight
    else:
        G = int(codes.max()) + 1 if n_cases else 0
        U_all, W_all = np.zeros((G, m)), np.zeros((G, m))
        for j in range(m):      # summed in a canonical order: the sums are order-free too
            order = np.lexsort((weight[:, j], contrib[:, j], codes))
            np.add.at(U_all[:, j], codes[order], contrib[order, j])
            np.add.at(W_all[:, j], codes[order], weight[order, j])
    active = W_all > 0
    by_n: dict[int, list[int]] = defaultdict(list)
    for j in range(m):
        k = int(active[:, j].sum())
        if k:
            by_n[k].append(j)
    for n, cols in sorted(by_n.items()):
        U = np.empty((n, len(cols)))
        W = np.empty((n, len(cols)))
        for i, j in enumerate(cols):
            u, v = U_all[active[:, j], j], W_all[active[:, j], j]
            if (v == v[0]).all():               # canonical order: by U, then by W
                U[:, i], W[:, i] = np.sort(u), v
            else:
                order = np.lexsort((v, u))
                U[:, i], W[:, i] = u[order], v[order]
        yield _Group(cols, U, W)


def _diffs(base: np.ndarray, cand: np.ndarray, w: np.ndarray | None):
    ok = np.isfinite(base) & np.isfinite(cand)
    if w is not None:
        ok &= (w > 0)[:, None]
    with np.errstate(invalid="ignore"):
        diffs = np.where(ok, cand - base, 0.0)
    scale = np.maximum(np.abs(np.where(ok, base, 0.0)), np.abs(np.where(ok, cand, 0.0)))
    zero = ok & (np.abs(diffs) <= _TIE_RTOL * scale)
    return ok, np.where(zero, 0.0, diffs), zero


def minimum_detectable_effect(U: np.ndarray, W: np.ndarray, alpha: float, power: float = POWER,
                              sided: int = 2) -> np.ndarray:
    """The smallest true difference a test at level ``alpha`` (two-sided, or one-sided with
    ``sided=1``) detects with probability ``power``, from the observed variance of the
    paired differences: ``(z_{1-alpha/sided} + z_power) * se``, where ``se`` is the
    linearised standard error of ``sum U / sum W`` over ``n`` units, ``sqrt(n / (n - 1) *
    sum (U_g - theta W_g)^2) / sum W`` (for unweighted cases: ``sd(d) / sqrt(n)``). NaN
    where ``n < 2`` or the differences do not vary (the variance says nothing then)."""
    from scipy.special import ndtri

    n = U.shape[0]
    T = W.sum(axis=0)
    theta = U.sum(axis=0) / T
    resid = U - theta * W
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(n / max(n - 1, 1) * (resid ** 2).sum(axis=0)) / T
    z = ndtri(1.0 - alpha / sided) + ndtri(power)
    tiny = 1e-12 * (np.abs(U).sum(axis=0) / T + 1e-300)
    return np.where((n >= 2) & (se > tiny), z * se, np.nan)


def _validate(confidence, interval, seed, n_resamples):
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if interval not in INTERVALS:
        raise ValueError(f"interval must be one of {', '.join(INTERVALS)}, got {interval!r}")
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")


def _method(kind: str, interval: str, clustered: bool, changed: int,
            bounded: bool = True) -> str:
    """The interval (and one-sided test) of a column under ``interval="auto"``:

    - pass/fail (``binary``): ``score``, the corrected score interval
      (``score.paired_interval``);
    - ``share`` (per-case values in [0, 1]): ``score-bound``, that interval on the gain
      and loss mass in units of a scale that shrinks with the size of the changes
      (:mod:`raglab.stats.bound`), however many units changed: from about 50 changed
      units it is as narrow as the bootstrap-t (within 7% at n = 500-2,000), and it keeps
      each side's error at the margin at most 2.5% where the bootstrap-t of a skewed share
      reached 3.5% (docs/statistics.md, "Error rates of the decisions");
    - unbounded graded kinds (rank, count, latency, cost): ``bootstrap-t`` from
      ``DENSE_MIN`` changed units; below, where no bound exists and the bootstrap-t
      under-covers, the sign-flip inversion (``signflip``);
    - clustered comparisons: the cluster sign-flip inversion.

    A share whose differences leave [-1, 1] (values outside [0, 1]) is treated as unbounded.
    Any other ``interval`` is the user's explicit choice for every column."""
    if interval != "auto":
        return interval
    if clustered:
        return "signflip"
    if kind == "binary":
        return "score"
    if kind == "share" and bounded:
        return "score-bound"
    return "bootstrap-t" if changed >= DENSE_MIN else "signflip"


def _score_counts(U: np.ndarray, W: np.ndarray, weighted: bool, scale=1.0):
    """``(g, lost, n)`` per column for the score methods: gain and loss (mass in units of
    ``scale``, for shares: :mod:`raglab.stats.bound`) and the number of cases; effective
    figures when the cases are weighted."""
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.where(W > 0, U / np.where(W > 0, W, 1.0), 0.0)
    gain, loss = np.maximum(d, 0.0) / scale, np.maximum(-d, 0.0) / scale
    if not weighted:
        n = float(U.shape[0])
        return gain.sum(0), loss.sum(0), np.full(U.shape[1], n)
    out = [weighted_counts(gain[:, i], loss[:, i], W[:, i]) for i in range(U.shape[1])]
    return tuple(np.array(x) for x in zip(*out))


def _score_mde(g: float, lost: float, n: float, alpha: float) -> float | None:
    m = max(int(round(n)), 1)
    return score_mde(m, round(min((g + lost) / n, 1.0), 6), round(alpha, 9))


def _plan(n: int, stream: int) -> np.random.Generator:
    """The fixed resample plan of the tests and of the intervals inverting them (stream 1:
    sign vectors, 2: the bootstrap-t's resamples), applied to units in canonical order
    (:func:`_groups`): the same units give the same figures whatever the seed and order."""
    return np.random.default_rng([_PLAN, n, stream])


def paired_table(base: np.ndarray, cand: np.ndarray, kinds: Sequence[str],
                 directions: Sequence[str], *, confidence: float = 0.95,
                 n_resamples: int = 2000, seed: int = 0, interval: str = "auto",
                 weights: Sequence[float] | np.ndarray | None = None,
                 clusters: Sequence | np.ndarray | None = None) -> list[PairedStat]:
    """Paired statistics of ``cand`` against ``base``, one ``PairedStat`` per column.

    ``base``, ``cand``: ``(n_cases, n_metrics)`` float arrays aligned on cases, NaN where
    the metric does not apply to that case in that run. Column ``j`` is compared over the
    rows where both values are finite (and the weight is positive). ``kinds[j]`` is the
    metric's kind. ``weights``: one finite weight >= 0 per case (the mean and every statistic
    are weighted). ``clusters``: one label per case; cases with one label are flipped and
    resampled together.

    Two-sided p-values: ``binary`` columns (values 0/1) with the score interval get the
    test that interval inverts (``score.paired_pvalue`` at 0, on effective counts when
    weighted: p < 1 - confidence exactly when 0 is outside the interval), the others the
    sign-flip permutation test of the (weighted) mean difference, drawn from a fixed plan
    (the same data give the same p-value whatever ``seed`` and whatever the order of the
    cases). Intervals (``interval="auto"``, by kind, see :func:`_method`): the corrected
    score interval (``score.paired_interval``) for pass/fail metrics and, on the scaled
    gain and loss mass, for sparse shares, the bootstrap-t for graded ones, the cluster
    sign-flip inversion with clusters; ``signflip``, ``bca`` and ``percentile`` apply one
    method to every column. ``mde``: for pass/fail metrics the exact power of that
    two-sided test at the planned discordance (sparse shares: its normal approximation,
    scaled), else from the observed variance.
    Deterministic: the sign-flip and bootstrap-t resamples follow the fixed plan of
    :func:`_plan` (seed-free); the ``bca`` and ``percentile`` resamples come from
    ``numpy.random.default_rng([seed, n, 0])`` for each distinct number of units ``n``.
    """
    base, cand = _check(base, cand, kinds, directions)
    _validate(confidence, interval, seed, n_resamples)
    w, codes = _design(base.shape[0], weights, clusters)
    m = base.shape[1]
    ok, diffs, zero = _diffs(base, cand, w)
    for j in (j for j in range(m) if kinds[j] == "binary"):
        values = np.concatenate([base[ok[:, j], j], cand[ok[:, j], j]])
        if not np.isin(values, (0.0, 1.0)).all():
            raise ValueError(f"column {j} is binary but holds values other than 0/1")
    pos = ((diffs > 0) & ok).sum(axis=0)
    neg = ((diffs < 0) & ok).sum(axis=0)
    ties = zero.sum(axis=0)
    ns = ok.sum(axis=0)
    plain = w is None and codes is None
    if w is None:
        n_eff = ns.astype(np.float64)
    else:
        wm = np.sort(np.where(ok, w[:, None], 0.0), axis=0)    # order-free sums
        with np.errstate(invalid="ignore", divide="ignore"):
            n_eff = wm.sum(axis=0) ** 2 / (wm ** 2).sum(axis=0)
    alpha = 1.0 - confidence

    results: list[PairedStat] = [_EMPTY] * m
    for g in _groups(diffs, ok, w, codes):
        n, cols, U, W = g.n, g.cols, g.U, g.W
        delta = U.sum(axis=0) / W.sum(axis=0)
        r = U / W
        spread = r.max(axis=0) - r.min(axis=0)
        degenerate = spread <= _TIE_RTOL * np.abs(r).max(axis=0)
        changed = (np.abs(U) > 0).sum(axis=0)
        bounded = (np.abs(r) <= 1.0 + 1e-12).all(axis=0)
        methods = [_method(kinds[j], interval, codes is not None, int(c), bool(bd))
                   for j, c, bd in zip(cols, changed, bounded)]
        FU, FW, exact = signflip_sums(U, W, n_resamples, _plan(n, 1))
        p = signflip_pvalues_at(U, W, FU, FW, exact)
        low, high = np.full(len(cols), np.nan), np.full(len(cols), np.nan)
        bca = np.zeros(len(cols), dtype=bool)
        scored = np.array([mt.startswith("score") for mt in methods])
        mde = np.full(len(cols), np.nan)  # score columns: planned from the null, below
        if not scored.all():
            mde[~scored] = minimum_detectable_effect(U[:, ~scored], W[:, ~scored], alpha)
        sel = np.array([mt == "signflip" for mt in methods])
        if sel.any():
            low[sel], high[sel] = signflip_interval(U[:, sel], W[:, sel], FU[:, sel],
                                                    FW[:, sel], exact, confidence)
        sel = np.array([mt in ("bca", "percentile") for mt in methods])
        if sel.any():
            rng = np.random.default_rng([seed, n, 0])
            if plain:
                reps = bootstrap_means(U[:, sel], n_resamples, rng)
                lo_, hi_, b_ = bootstrap_interval(U[:, sel], reps, confidence,
                                                  allow_bca=interval == "bca")
            else:
                lo_, hi_, b_ = unit_bootstrap_interval(U[:, sel], W[:, sel], n_resamples, rng,
                                                       confidence, allow_bca=interval == "bca")
            low[sel], high[sel], bca[sel] = lo_, hi_, b_
        sel = np.array([mt == "bootstrap-t" for mt in methods])
        if sel.any():
            th, se, t = studentized_replicates(U[:, sel], W[:, sel], n_resamples, _plan(n, 2))
            low[sel], high[sel] = bootstrap_t_interval(th, se, t, confidence)
        sel = scored
        if sel.any():
            pf = np.array([methods[i] == "score" for i in np.flatnonzero(sel)])
            sc = np.where(pf, 1.0, bound_scale(U[:, sel], W[:, sel]))   # shares: scaled
            gs, ls, nn = _score_counts(U[:, sel], W[:, sel], w is not None, sc)
            lo_, hi_ = paired_interval(gs, ls, nn, confidence)
            low[sel], high[sel] = lo_ * sc, hi_ * sc
            # pass/fail: the two-sided test whose inversion is the interval
            p[np.flatnonzero(sel)[pf]] = paired_pvalue(gs[pf], ls[pf], nn[pf], 0.0, "two")
            planned = sc * normal_mde(nn, np.minimum((gs + ls) / np.maximum(nn, 1e-300), 1.0),
                                      alpha)
            planned[pf] = [np.nan if v is None else v for v in
                           (_score_mde(a, b, c, alpha)
                            for a, b, c in zip(gs[pf], ls[pf], nn[pf]))]
            mde[sel] = planned

        for i, j in enumerate(cols):
            d = float(delta[i])
            lo: float | None
            hi: float | None
            method = methods[i]
            if degenerate[i] and not method.startswith("score") and not (
                    method == "signflip" and (np.isnan(low[i]) or np.isnan(high[i]))):
                # every unit's difference equal: the inversion's one point, unless the
                # sign-flip test cannot reach the level (n <= 5 units: no value excluded)
                d = float(r[0, i])
                lo = hi = d
                method = "degenerate"
            elif np.isnan(low[i]) or np.isnan(high[i]):
                lo = None if np.isnan(low[i]) else float(low[i])
                hi = None if np.isnan(high[i]) else float(high[i])
                method = "unbounded"
            else:
                lo, hi = float(low[i]), float(high[i])
                if method in ("bca", "percentile"):
                    method = "bca" if bca[i] else "percentile"
            if methods[i] == "score":
                test = "score"
            else:
                test = "permutation-exact" if exact else "permutation"
            better, worse = (neg[j], pos[j]) if directions[j] == "lower" else (pos[j], neg[j])
            results[j] = PairedStat(d, lo, hi, max(float(p[i]), _P_FLOOR), int(ns[j]),
                                    int(better), int(ties[j]), int(worse), method, test,
                                    None if np.isnan(mde[i]) else float(mde[i]),
                                    float(n_eff[j]), n)
    return results


def one_sided(base: np.ndarray, cand: np.ndarray, thetas: Sequence[float],
              sides: Sequence[str], *, kinds: Sequence[str] | None = None,
              n_resamples: int = 2000, seed: int = 0, interval: str = "auto",
              weights: Sequence[float] | np.ndarray | None = None,
              clusters: Sequence | np.ndarray | None = None) -> list[float | None]:
    """One-sided p-values, one per column: ``sides[j] == "less"`` tests ``H0: delta >=
    thetas[j]`` against ``delta < thetas[j]`` (small when the candidate is lower than the
    baseline by more than ``-thetas[j]``), ``"greater"`` the mirror. The test is the one
    whose inversion is the column's interval in :func:`paired_table` (same kinds,
    weights and clusters): the corrected score test for pass/fail metrics (and sparse
    shares, on their scaled mass; ``score.paired_pvalue``), the bootstrap-t for graded ones
    (with the interval's fixed plan: seed-free), the sign-flip test with clusters or
    ``interval="signflip"``. A function of the multiset of paired units, not of their
    order; ``seed`` moves none of these tests. None where no case is paired."""
    base = np.asarray(base, dtype=np.float64)
    cand = np.asarray(cand, dtype=np.float64)
    if base.ndim != 2 or base.shape != cand.shape:
        raise ValueError("base and cand must be 2-D arrays of one shape")
    m = base.shape[1]
    if len(thetas) != m or len(sides) != m or any(s not in ("less", "greater") for s in sides):
        raise ValueError("one theta and one side (less or greater) per column")
    kinds = list(kinds) if kinds is not None else ["share"] * m
    _validate(0.5, interval, seed, n_resamples)
    w, codes = _design(base.shape[0], weights, clusters)
    ok, diffs, _ = _diffs(base, cand, w)
    out: list[float | None] = [None] * m
    for g in _groups(diffs, ok, w, codes):
        changed = (np.abs(g.U) > 0).sum(axis=0)
        bounded = (np.abs(g.U / g.W) <= 1.0 + 1e-12).all(axis=0)
        for i, j in enumerate(g.cols):
            U, W = g.U[:, [i]], g.W[:, [i]]
            theta, side = float(thetas[j]), sides[j]
            method = _method(kinds[j], interval, codes is not None, int(changed[i]),
                             bool(bounded[i]))
            if method.startswith("score"):
                sc = 1.0 if method == "score" else float(bound_scale(U, W)[0])
                gs, ls, nn = _score_counts(U, W, w is not None, sc)
                t0 = theta if method == "score" else min(max(theta / sc, -1.0), 1.0)
                v = float(paired_pvalue(gs, ls, nn, t0, side)[0])
            elif method == "bootstrap-t":
                th, se, t = studentized_replicates(U, W, n_resamples, _plan(g.n, 2))
                if not se[0] > 0:       # no variation: the difference is known
                    v = 1.0 if (th[0] >= theta if side == "less" else th[0] <= theta) else 0.0
                else:
                    v = float(bootstrap_t_pvalues(th, se, t, theta, side)[0])
            else:
                FU, FW, exact = signflip_sums(U, W, n_resamples, _plan(g.n, 1))
                v = float(signflip_pvalues_at(U, W, FU, FW, exact, np.array([theta]), side)[0])
            out[j] = max(v, _P_FLOOR)
    return out
