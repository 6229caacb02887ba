"""Vectorised resampling engines for the mean of paired differences.

Every function takes ``D``, an ``(n, k)`` float64 matrix: ``k`` columns of ``n`` paired
differences each (columns of different metrics that apply to the same number of cases are
stacked, whatever their applicability masks: a resample of positions ``0..n-1`` is valid
for any of them). Resamples are drawn in chunks of bounded size (about ``_CHUNK_CELLS``
cells), never one Python iteration per resample.

- ``bootstrap_means``: ``B`` nonparametric bootstrap replicates of each column's mean, as
  ``counts @ D / n`` where ``counts`` holds each resample's multiplicity of every case.
- ``bootstrap_interval``: percentile and BCa intervals from those replicates. BCa's
  acceleration uses the closed-form jackknife of a mean (leave-one-out means are
  ``(S - d_i) / (n - 1)``, so ``a = sum(c^3) / (6 sum(c^2)^1.5)`` with ``c = d - mean``).
- ``signflip_pvalues``: two-sided sign-flip permutation p-values of the mean difference,
  by exact enumeration of the ``2**n`` sign vectors when ``2**n <= n_resamples``, else by
  Monte Carlo with the ``(b + 1) / (m + 1)`` correction (a valid p-value: under the null
  ``P(p <= x) <= x``).
"""

from __future__ import annotations

import numpy as np

_CHUNK_CELLS = 2_000_000   # resample cells (rows x cases) generated at once: ~8 MB of int32
_MIN_CHUNK_ROWS = 128      # fewer rows make BLAS's threaded matrix product inefficient
BCA_MIN_N = 10             # below this BCa's jackknife acceleration is too unstable: percentile
_TIE_RTOL = 1e-9           # relative tolerance for comparing resampled sums with the observed


def _chunks(n_resamples: int, n: int):
    size = max(1, min(n_resamples, max(_MIN_CHUNK_ROWS, _CHUNK_CELLS // max(n, 1))))
    for start in range(0, n_resamples, size):
        yield start, min(size, n_resamples - start)


def bootstrap_means(D: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``(n_resamples, k)`` bootstrap replicates of the column means of ``D``."""
    n, k = D.shape
    out = np.empty((n_resamples, k))
    for start, c in _chunks(n_resamples, n):
        offsets = np.arange(c, dtype=np.int64) * n
        dtype = np.int32 if c * n < 2 ** 31 else np.int64
        idx = rng.integers(0, n, size=(c, n), dtype=dtype)
        idx += offsets.astype(dtype)[:, None]
        counts = np.bincount(idx.ravel(), minlength=c * n).reshape(c, n)
        out[start:start + c] = counts.astype(np.float64) @ D
    out /= n
    return out


def _quantiles(sorted_reps: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per-column linear-interpolation quantile (numpy's default, Hyndman-Fan 7) at level
    ``q[j]`` of column ``j`` of ``sorted_reps`` (sorted along axis 0)."""
    B = sorted_reps.shape[0]
    h = np.clip(q, 0.0, 1.0) * (B - 1)
    lo = np.floor(h).astype(np.intp)
    hi = np.minimum(lo + 1, B - 1)
    cols = np.arange(sorted_reps.shape[1])
    a, b = sorted_reps[lo, cols], sorted_reps[hi, cols]
    return a + (h - lo) * (b - a)


def bootstrap_interval(D: np.ndarray, reps: np.ndarray, confidence: float,
                       allow_bca: bool = True):
    """Intervals of each column's mean from its bootstrap replicates ``reps``.

    Returns ``(low, high, use_bca)``: BCa where valid, percentile otherwise. BCa is valid
    when ``n >= BCA_MIN_N``, the bias correction ``z0`` and the acceleration ``a`` are
    finite, ``1 - a (z0 + z) > 0`` at both tails, and both adjusted levels are at least
    half a replicate away from the ends of the bootstrap distribution (farther out, BCa
    would only return an extreme replicate). ``z0`` counts replicates equal to the
    estimate as half below (scipy's 'mean' percentile of score), with a relative tolerance,
    so the discrete bootstrap distributions of 0/1 and graded metrics are not biased by
    rounding.
    """
    from scipy.special import ndtr, ndtri

    n, k = D.shape
    B = reps.shape[0]
    alpha = (1.0 - confidence) / 2.0
    theta = D.mean(axis=0)
    s = np.sort(reps, axis=0)
    pct_low = _quantiles(s, np.full(k, alpha))
    pct_high = _quantiles(s, np.full(k, 1.0 - alpha))

    scale = np.abs(D).mean(axis=0)
    tol = _TIE_RTOL * scale
    below = (reps < theta - tol).sum(axis=0) + (reps <= theta + tol).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        z0 = ndtri(below / (2.0 * B))
        c = D - theta
        a = (c ** 3).sum(axis=0) / (6.0 * ((c ** 2).sum(axis=0)) ** 1.5)
        z_lo, z_hi = ndtri(alpha), ndtri(1.0 - alpha)
        u_lo, u_hi = z0 + z_lo, z0 + z_hi
        den_lo, den_hi = 1.0 - a * u_lo, 1.0 - a * u_hi
        q_lo = ndtr(z0 + u_lo / den_lo)
        q_hi = ndtr(z0 + u_hi / den_hi)
    edge = 0.5 / B
    valid = allow_bca & (n >= BCA_MIN_N) & np.isfinite(z0) & np.isfinite(a) & (den_lo > 0) & (den_hi > 0)
    valid &= np.isfinite(q_lo) & np.isfinite(q_hi) & (q_lo >= edge) & (q_hi <= 1.0 - edge)
    q_lo = np.where(valid, q_lo, alpha)
    q_hi = np.where(valid, q_hi, 1.0 - alpha)
    bca_low, bca_high = _quantiles(s, q_lo), _quantiles(s, q_hi)
    low = np.where(valid, bca_low, pct_low)
    high = np.where(valid, bca_high, pct_high)
    return low, high, valid


def signflip_pvalues(D: np.ndarray, n_resamples: int, rng: np.random.Generator):
    """Two-sided sign-flip permutation p-values of each column's mean (``(k,)`` array) and
    whether they are exact. The statistic is ``|sum(s_i d_i)|``; a resample counts when it
    is at least the observed one (within a relative tolerance, so ties of discrete data
    are not lost to rounding)."""
    n, k = D.shape
    total = D.sum(axis=0)
    observed = np.abs(total)
    tol = _TIE_RTOL * np.abs(D).sum(axis=0)
    threshold = observed - tol
    if n < 63 and 2 ** n <= n_resamples:
        codes = np.arange(2 ** n)[:, None]
        bits = ((codes >> np.arange(n)) & 1).astype(np.float64)   # (2^n, n), 1 = flipped
        null = np.abs(total - 2.0 * (bits @ D))
        return (null >= threshold).sum(axis=0) / float(2 ** n), True
    count = np.zeros(k, dtype=np.int64)
    n_bytes = (n + 7) // 8
    for _, c in _chunks(n_resamples, n):
        packed = rng.integers(0, 256, size=(c, n_bytes), dtype=np.uint8)
        bits = np.unpackbits(packed, axis=1, count=n).astype(np.float64)
        null = np.abs(total - 2.0 * (bits @ D))
        count += (null >= threshold).sum(axis=0)
    return (count + 1.0) / (n_resamples + 1.0), False
