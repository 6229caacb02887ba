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
  ``P(p <= x) <= x``). Monte Carlo cannot resolve a p-value much below ``10 / m``, yet a
  Holm adjustment over a metric x slice family of hundreds of rows needs exactly those: so
  when fewer than ``_MIN_EXCEEDANCES`` resamples reach the observed statistic, the tail
  probability of the same permutation distribution is computed instead: exactly, by
  enumeration, up to ``n = 20``; beyond, by its saddlepoint approximation (Robinson 1982;
  Lugannani-Rice with the exact cumulant generating function ``K(t) = sum log cosh(t
  d_i)``), which is accurate far into the tail (within a few percent once the
  distribution has enough points; see tests/stats/test_tails.py).
"""

from __future__ import annotations

import numpy as np

_CHUNK_CELLS = 2_000_000   # resample cells (rows x cases) generated at once: ~8 MB of int32
_CACHE_CELLS = 131_072     # cells counted per bincount call: its counters stay in cache
_MIN_CHUNK_ROWS = 128      # fewer rows make BLAS's threaded matrix product inefficient
BCA_MIN_N = 10             # below this BCa's jackknife acceleration is too unstable: percentile
_TIE_RTOL = 1e-9           # relative tolerance for comparing resampled sums with the observed
_MIN_EXCEEDANCES = 10      # below this Monte Carlo count, the tail is computed instead
_ENUMERATE_MAX_N = 20      # ... by enumerating the 2**n sign vectors up to this n


def _chunks(n_resamples: int, n: int):
    size = max(1, min(n_resamples, max(_MIN_CHUNK_ROWS, _CHUNK_CELLS // max(n, 1))))
    for start in range(0, n_resamples, size):
        yield start, min(size, n_resamples - start)


def bootstrap_means(D: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``(n_resamples, k)`` bootstrap replicates of the column means of ``D``."""
    n, k = D.shape
    out = np.empty((n_resamples, k))
    dtype = np.int32 if n < 2 ** 31 else np.int64
    sub = max(4, _CACHE_CELLS // max(n, 1))       # rows counted at once: cache-sized
    offsets = (np.arange(sub, dtype=np.int64) * n)[:, None]
    for start, c in _chunks(n_resamples, n):
        idx = rng.integers(0, n, size=(c, n), dtype=dtype)
        counts = np.empty((c, n))
        for r in range(0, c, sub):
            rows = min(sub, c - r)
            flat = (idx[r:r + rows] + offsets[:rows]).ravel()
            counts[r:r + rows] = np.bincount(flat, minlength=rows * n).reshape(rows, n)
        out[start:start + c] = counts @ D
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
    valid = allow_bca & (n >= BCA_MIN_N) & np.isfinite(z0) & np.isfinite(a)
    valid &= (den_lo > 0) & (den_hi > 0)
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
    p = (count + 1.0) / (n_resamples + 1.0)
    far = count < _MIN_EXCEEDANCES
    if far.any() and n <= _ENUMERATE_MAX_N:
        p[far] = _enumerated_pvalues(D[:, far], threshold[far])
    elif far.any():
        p[far] = np.minimum(1.0, 2.0 * saddlepoint_tail(D[:, far], observed[far]))
    return p, False


def _enumerated_pvalues(D: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """Exact two-sided sign-flip p-values by enumerating all ``2**n`` sign vectors in
    chunks (for the few columns of small ``n`` whose Monte Carlo count was too low)."""
    n, k = D.shape
    total = D.sum(axis=0)
    count = np.zeros(k, dtype=np.int64)
    step = 2 ** min(n, 16)
    for start in range(0, 2 ** n, step):
        codes = np.arange(start, start + step)[:, None]
        bits = ((codes >> np.arange(n)) & 1).astype(np.float64)
        count += (np.abs(total - 2.0 * (bits @ D)) >= threshold).sum(axis=0)
    return count / float(2 ** n)


def saddlepoint_tail(D: np.ndarray, x: np.ndarray, iterations: int = 200) -> np.ndarray:
    """``P(sum_i s_i d_i >= x_j)`` for each column ``j`` of ``D``, ``s_i`` independent
    fair signs, by the Lugannani-Rice saddlepoint approximation with the exact cumulant
    generating function ``K(t) = sum log cosh(t d_i)``. When the ``d_i`` are multiples of
    a step ``h`` (graded scores, ranks, counts), the sum moves in steps of ``2 h`` and the
    tail is evaluated at ``x - h``, half a step below (the usual continuity correction).
    ``x`` at or beyond ``sum |d_i|`` gives the exact ``2 ** -(number of nonzero d_i)``;
    ``x`` near 0 gives 1/2."""
    from scipy.special import ndtr

    D = np.abs(D)                        # the null distribution depends on |d_i| only
    total = D.sum(axis=0)
    V = (D * D).sum(axis=0)
    out = np.full(D.shape[1], 0.5)
    edge = x >= total * (1.0 - 1e-12)
    out[edge] = 2.0 ** -(D[:, edge] > 0).sum(axis=0)
    x = np.maximum(x - lattice_step(D), 0.0)   # continuity correction: half the span
    mid = ~edge & (x > 1e-8 * np.sqrt(V))
    if not mid.any():
        return out
    d, xm, Vm = D[:, mid], x[mid], V[mid]
    t = xm / Vm          # K'(t) <= t V: Newton on the concave K' climbs from below
    for _ in range(iterations):
        th = np.tanh(t * d)
        k1 = (d * th).sum(axis=0)
        k2 = (d * d * (1.0 - th * th)).sum(axis=0)
        step = (xm - k1) / np.maximum(k2, 1e-300)
        t = t + step
        if np.all(np.abs(step) <= 1e-12 * np.abs(t)):
            break
    th = np.tanh(t * d)
    k2 = (d * d * (1.0 - th * th)).sum(axis=0)
    td = np.abs(t * d)
    K = (td + np.log1p(np.exp(-2.0 * td)) - np.log(2.0)).sum(axis=0)   # log cosh, stable
    w = np.sqrt(np.maximum(2.0 * (t * xm - K), 0.0))
    u = t * np.sqrt(k2)
    with np.errstate(divide="ignore", invalid="ignore"):
        phi = np.exp(-0.5 * w * w) / np.sqrt(2.0 * np.pi)
        tail = ndtr(-w) + phi * (1.0 / u - 1.0 / w)
    normal = ndtr(-xm / np.sqrt(Vm))
    good = np.isfinite(tail) & (tail > 0) & (w > 1e-6)
    out[mid] = np.clip(np.where(good, tail, normal), 0.0, 0.5)
    return out


def lattice_step(D: np.ndarray, max_decimals: int = 6) -> np.ndarray:
    """For each column, the largest ``h`` with every ``|d_i|`` an integer multiple of it
    (the gcd on the first decimal scale, up to ``max_decimals``, where all values are
    integers), or 0 when there is none (continuous values)."""
    D = np.abs(D)
    step = np.zeros(D.shape[1])
    head = D[:64] * 10.0 ** max_decimals        # a cheap first look rules out most
    todo = np.asarray((np.abs(head - np.rint(head)) <= 1e-6 + 1e-12 * head).all(axis=0))
    for decimals in range(max_decimals + 1):
        if not todo.any():
            break
        scale = 10.0 ** decimals
        scaled = D[:, todo] * scale
        ints = np.rint(scaled)
        whole = (np.abs(scaled - ints) <= 1e-6 + 1e-12 * scaled).all(axis=0)
        whole &= (ints < 2 ** 53).all(axis=0)
        if whole.any():
            cols = np.flatnonzero(todo)[whole]
            g = np.gcd.reduce(ints[:, whole].astype(np.int64), axis=0)
            step[cols] = g / scale
            todo[cols] = False
    return step
