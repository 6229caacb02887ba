"""Paired comparison of two runs, metric by metric: ``paired_table``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from raglab.stats.resample import bootstrap_interval, bootstrap_means, signflip_pvalues

KINDS = ("share", "binary", "rank", "count", "latency", "cost")
DIRECTIONS = ("higher", "lower", "none")
_TIE_RTOL = 1e-12   # |cand - base| <= this x max(|cand|, |base|) is a tie (and a zero diff)
_P_FLOOR = float(np.finfo(np.float64).tiny)   # a p-value that underflows reads as this, not 0


@dataclass(frozen=True)
class PairedStat:
    """One metric x slice comparison of a candidate with a baseline over paired cases."""
    delta: float | None      # mean(candidate) - mean(baseline) over the n paired cases
    ci_low: float | None     # paired CI of delta; None when n == 0
    ci_high: float | None
    p_value: float | None    # two-sided; None when n == 0
    n: int                   # cases where the metric applies in both runs
    wins: int                # candidate better by the metric's direction ("none": higher)
    ties: int
    losses: int
    ci_method: str           # "bca" | "percentile" | "degenerate" | "none"
    test: str                # "permutation" | "permutation-exact" | "mcnemar-exact" | "none"


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


def _mcnemar(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Exact two-sided McNemar p-values from the discordant counts ``b`` (baseline passed,
    candidate failed) and ``c``: the binomial test of ``c`` out of ``b + c`` at 1/2, which
    for p = 1/2 is ``min(1, 2 P(X <= min(b, c)))`` (what ``scipy.stats.binomtest`` gives);
    1 when there is no discordant pair."""
    from scipy.stats import binom

    n = b + c
    p = np.minimum(1.0, 2.0 * binom.cdf(np.minimum(b, c), n, 0.5))
    return np.where(n > 0, p, 1.0)


def paired_table(base: np.ndarray, cand: np.ndarray, kinds: Sequence[str],
                 directions: Sequence[str], *, confidence: float = 0.95,
                 n_resamples: int = 2000, seed: int = 0,
                 interval: str = "bca") -> list[PairedStat]:
    """Paired statistics of ``cand`` against ``base``, one ``PairedStat`` per column.

    ``base``, ``cand``: ``(n_cases, n_metrics)`` float arrays aligned on cases, NaN where
    the metric does not apply to that case in that run. Column ``j`` is compared over the
    rows where both values are finite. ``kinds[j]`` is the metric's kind from
    ``raglab.metrics.catalog``: ``binary`` columns (values 0/1) get an exact McNemar test,
    the others a sign-flip permutation test of the mean difference. The interval is a
    paired bootstrap of the mean difference, BCa where valid, percentile otherwise, and
    equals ``[delta, delta]`` when every difference is the same; ``interval="percentile"``
    asks for the percentile interval throughout. Deterministic: resamples
    come from ``numpy.random.default_rng([seed, n, stream])`` for each distinct ``n``, so
    equal inputs give equal outputs, and a column's result does not depend on which other
    columns are in the table.
    """
    base, cand = _check(base, cand, kinds, directions)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if interval not in ("bca", "percentile"):
        raise ValueError(f"interval must be 'bca' or 'percentile', got {interval!r}")
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    m = base.shape[1]
    ok = np.isfinite(base) & np.isfinite(cand)
    for j in (j for j in range(m) if kinds[j] == "binary"):
        values = np.concatenate([base[ok[:, j], j], cand[ok[:, j], j]])
        if not np.isin(values, (0.0, 1.0)).all():
            raise ValueError(f"column {j} is binary but holds values other than 0/1")
    with np.errstate(invalid="ignore"):
        diffs = np.where(ok, cand - base, 0.0)
    scale = np.maximum(np.abs(np.where(ok, base, 0.0)), np.abs(np.where(ok, cand, 0.0)))
    zero = ok & (np.abs(diffs) <= _TIE_RTOL * scale)
    diffs = np.where(zero, 0.0, diffs)
    pos = ((diffs > 0) & ok).sum(axis=0)
    neg = ((diffs < 0) & ok).sum(axis=0)
    ties = zero.sum(axis=0)
    ns = ok.sum(axis=0)

    by_n: dict[int, list[int]] = defaultdict(list)
    for j in range(m):
        if ns[j] > 0:
            by_n[int(ns[j])].append(j)

    results: list[PairedStat] = [_EMPTY] * m
    for n, cols in sorted(by_n.items()):
        D = np.empty((n, len(cols)))
        for i, j in enumerate(cols):
            D[:, i] = diffs[ok[:, j], j]
        delta = D.mean(axis=0)
        spread = D.max(axis=0) - D.min(axis=0)
        degenerate = spread <= _TIE_RTOL * np.abs(D).max(axis=0)

        reps = bootstrap_means(D, n_resamples, np.random.default_rng([seed, n, 0]))
        low, high, bca = bootstrap_interval(D, reps, confidence,
                                            allow_bca=interval == "bca")

        binary = np.array([kinds[j] == "binary" for j in cols])
        p = np.empty(len(cols))
        exact = False
        if (~binary).any():
            p[~binary], exact = signflip_pvalues(D[:, ~binary], n_resamples,
                                                 np.random.default_rng([seed, n, 1]))
        if binary.any():
            bcols = [j for j, is_b in zip(cols, binary) if is_b]
            b_vals = np.stack([base[ok[:, j], j] for j in bcols], axis=1)
            c_vals = np.stack([cand[ok[:, j], j] for j in bcols], axis=1)
            lost = ((b_vals == 1) & (c_vals == 0)).sum(axis=0)
            gained = ((b_vals == 0) & (c_vals == 1)).sum(axis=0)
            p[binary] = _mcnemar(lost, gained)

        for i, j in enumerate(cols):
            d = float(delta[i])
            if degenerate[i]:
                d = float(D[0, i])
                lo = hi = d
                method = "degenerate"
            else:
                lo, hi = float(low[i]), float(high[i])
                method = "bca" if bca[i] else "percentile"
            if binary[i]:
                test = "mcnemar-exact"
            else:
                test = "permutation-exact" if exact else "permutation"
            better, worse = (neg[j], pos[j]) if directions[j] == "lower" else (pos[j], neg[j])
            results[j] = PairedStat(d, lo, hi, max(float(p[i]), _P_FLOOR), n, int(better),
                                    int(ties[j]), int(worse), method, test)
    return results
