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


def bootstrap_interval(D: np.ndarray | None, reps: np.ndarray, confidence: float,
                       allow_bca: bool = True, *, theta: np.ndarray | None = None,
                       jackknife: np.ndarray | None = None, n: int | None = None):
    """Intervals of each column's estimate from its bootstrap replicates ``reps``.

    The estimate is the mean of ``D``'s column, or ``theta`` with its leave-one-out values
    ``jackknife`` (``(n, k)``) for another statistic. Returns ``(low, high, use_bca)``: BCa
    where valid, percentile otherwise. BCa is valid when ``n >= BCA_MIN_N``, the bias
    correction ``z0`` and the acceleration ``a`` (from the jackknife: ``a = sum(c^3) / (6
    sum(c^2)^1.5)`` with ``c = mean(loo) - loo``; for a mean ``c`` is proportional to ``d -
    mean``) are finite, ``1 - a (z0 + z) > 0`` at both tails, and both adjusted levels are
    at least half a replicate away from the ends of the bootstrap distribution (farther
    out, BCa would only return an extreme replicate). ``z0`` counts replicates equal to the
    estimate as half below (scipy's 'mean' percentile of score), with a relative tolerance,
    so the discrete bootstrap distributions of 0/1 and graded metrics are not biased by
    rounding.
    """
    from scipy.special import ndtr, ndtri

    if D is not None:
        n = D.shape[0]
        theta = D.mean(axis=0)
        jackknife = (D.sum(axis=0) - D) / max(n - 1, 1)
        scale = np.abs(D).mean(axis=0)
    else:
        assert theta is not None and jackknife is not None and n is not None
        scale = np.abs(jackknife).mean(axis=0)
    k = theta.shape[0]
    B = reps.shape[0]
    alpha = (1.0 - confidence) / 2.0
    s = np.sort(reps, axis=0)
    pct_low = _quantiles(s, np.full(k, alpha))
    pct_high = _quantiles(s, np.full(k, 1.0 - alpha))

    tol = _TIE_RTOL * scale
    below = (reps < theta - tol).sum(axis=0) + (reps <= theta + tol).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        z0 = ndtri(below / (2.0 * B))
        c = jackknife.mean(axis=0) - jackknife
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
    whether they are exact: :func:`signflip_pvalues_at` of unweighted cases at 0."""
    W = np.ones_like(D)
    FU, FW, exact = signflip_sums(D, W, n_resamples, rng)
    return signflip_pvalues_at(D, W, FU, FW, exact), exact


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


# ---- sign-flip test inversion over units ------------------------------------------------------
# A unit is a case, or a cluster of cases that are flipped together. Column j of ``U`` holds
# each unit's weighted sum of differences, ``sum_i w_i d_ij``, column j of ``W`` its weight
# ``sum_i w_i`` (cases where the metric does not apply weigh 0); the estimate is
# ``theta = sum U / sum W``. Under ``H0: delta = t`` each unit's ``U_g - t W_g`` is symmetric
# about 0, so the statistic ``O(t) = sum_g (U_g - t W_g)`` is compared with its sign flips
# ``sum_g s_g (U_g - t W_g)``. Writing ``F`` for the units a sign vector flips and ``R`` for
# the rest, the flip is at least as extreme as ``O(t)`` (``|O - 2 F(t)| >= |O|``) exactly when
# ``F(t) R(t) <= 0``, i.e. when ``t`` lies between the weighted mean of the flipped units,
# ``sum_F U / sum_F W``, and that of the others. The estimate always lies between them, so
# the accepted ``t`` form an interval whose limits are order statistics of those means:
# exact for the given sign vectors, no search.

def signflip_sums(U: np.ndarray, W: np.ndarray, n_resamples: int, rng: np.random.Generator):
    """``(FU, FW, exact)``: for every sign vector, the sums of ``U`` and ``W`` over the units
    it flips; all ``2**n`` sign vectors when ``2**n <= n_resamples`` (``exact``), else
    ``n_resamples`` random ones."""
    n, k = U.shape
    ones = bool((W == 1.0).all())        # unweighted cases: the flipped weight is a count

    def flipped_weight(bits: np.ndarray) -> np.ndarray:
        if ones:
            return np.repeat(bits.sum(axis=1)[:, None], k, axis=1)
        return bits @ W

    if n < 63 and 2 ** n <= n_resamples:
        codes = np.arange(2 ** n)[:, None]
        bits = ((codes >> np.arange(n)) & 1).astype(np.float64)   # (2^n, n), 1 = flipped
        return bits @ U, flipped_weight(bits), True
    FU = np.empty((n_resamples, k))
    FW = np.empty((n_resamples, k))
    n_bytes = (n + 7) // 8
    for start, c in _chunks(n_resamples, n):
        packed = rng.integers(0, 256, size=(c, n_bytes), dtype=np.uint8)
        bits = np.unpackbits(packed, axis=1, count=n).astype(np.float64)
        FU[start:start + c] = bits @ U
        FW[start:start + c] = flipped_weight(bits)
    return FU, FW, False


def _tolerance(U: np.ndarray, W: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Sums within this of 0 are 0 (ties of discrete data are not lost to rounding)."""
    return _TIE_RTOL * (np.abs(U).sum(axis=0) + np.abs(theta) * W.sum(axis=0))


def signflip_counts(U: np.ndarray, W: np.ndarray, FU: np.ndarray, FW: np.ndarray,
                    theta: np.ndarray, side: str = "two") -> np.ndarray:
    """How many sign vectors are at least as extreme as the observed statistic at
    ``delta = theta[j]``. ``two``: by absolute value (``F(t) R(t) <= 0``); ``less``: as low
    or lower (``F(t) >= 0``); ``greater``: as high or higher (``F(t) <= 0``)."""
    theta = np.asarray(theta, dtype=np.float64)
    tol = _tolerance(U, W, theta)
    f = FU - theta * FW
    f = np.where(np.abs(f) <= tol, 0.0, f)
    if side == "less":
        return (f >= 0).sum(axis=0)
    if side == "greater":
        return (f <= 0).sum(axis=0)
    if side != "two":
        raise ValueError(f"side must be two, less or greater, got {side!r}")
    r = (U.sum(axis=0) - theta * W.sum(axis=0)) - (FU - theta * FW)
    r = np.where(np.abs(r) <= tol, 0.0, r)
    return (f * r <= 0).sum(axis=0)


def signflip_pvalues_at(U: np.ndarray, W: np.ndarray, FU: np.ndarray, FW: np.ndarray,
                        exact: bool, theta: np.ndarray | float = 0.0,
                        side: str = "two") -> np.ndarray:
    """Sign-flip p-values at ``delta = theta``: ``count / 2**n`` when exact, else
    ``(count + 1) / (m + 1)`` (valid: ``P(p <= x) <= x`` under the null). Where fewer than
    ``_MIN_EXCEEDANCES`` random sign vectors reach the observed statistic, the tail of the
    same permutation distribution is computed (enumerated up to n = 20, else by its
    saddlepoint approximation) and the smaller of the two kept: the refinement resolves
    p-values the Monte Carlo count already calls small, and never moves one across a level
    the count decides."""
    k = U.shape[1]
    theta = np.broadcast_to(np.asarray(theta, dtype=np.float64), (k,)).copy()
    count = signflip_counts(U, W, FU, FW, theta, side)
    m = FU.shape[0]
    if exact:
        return count / float(m)
    p = (count + 1.0) / (m + 1.0)
    far = count < _MIN_EXCEEDANCES
    if far.any():
        X = U[:, far] - theta[far] * W[:, far]         # unit contributions at theta
        observed = X.sum(axis=0)
        if side == "two":
            x = np.abs(observed)
            if U.shape[0] <= _ENUMERATE_MAX_N:
                tail = _enumerated_pvalues(X, x - _TIE_RTOL * np.abs(X).sum(axis=0))
            else:
                tail = np.minimum(1.0, 2.0 * saddlepoint_tail(X, x))
        else:
            # the null is symmetric: P(T <= o) = P(T >= -o)
            x = observed if side == "greater" else -observed
            tail = np.where(x > 0, saddlepoint_tail(X, np.maximum(x, 0.0)), 1.0)
        p[far] = np.minimum(p[far], tail)
    return p


def signflip_interval(U: np.ndarray, W: np.ndarray, FU: np.ndarray, FW: np.ndarray,
                      exact: bool, confidence: float):
    """The ``delta`` values the two-sided sign-flip test does not reject at level ``alpha =
    1 - confidence``, with the same sign vectors as the p-value: ``(low, high)``, NaN where
    that set is unbounded (too few units for the test to reach the level).

    ``t`` is accepted when its p-value exceeds ``alpha``, i.e. when at least ``K`` sign
    vectors are as extreme: ``K = floor(alpha N) + 1`` for an exact enumeration of ``N``,
    ``floor(alpha (m + 1) - 1) + 1`` for ``m`` random ones. A sign vector is as extreme at
    ``t`` when ``t`` lies between the weighted means of the units it flips and of the
    others, so the lower limit is the K-th smallest of the lower means and the upper limit
    the K-th largest of the upper ones. Sums within rounding of 0 are 0, as in
    :func:`signflip_counts`, so the interval excludes 0 exactly when the p-value at 0 is at
    most ``alpha``."""
    alpha = 1.0 - confidence
    m, k = FU.shape
    K = int(np.floor(alpha * m)) + 1 if exact else int(np.floor(alpha * (m + 1) - 1.0)) + 1
    if K < 1 or K > m:
        return np.full(k, np.nan), np.full(k, np.nan)
    tol = _tolerance(U, W, np.zeros(k))
    RU, RW = U.sum(axis=0) - FU, W.sum(axis=0) - FW
    FU = np.where(np.abs(FU) <= tol, 0.0, FU)
    RU = np.where(np.abs(RU) <= tol, 0.0, RU)
    wtol = 1e-12 * W.sum(axis=0)
    empty = (FW <= wtol) | (RW <= wtol)     # no flip, or all flipped: extreme at every t
    with np.errstate(divide="ignore", invalid="ignore"):
        mf, mr = FU / FW, RU / RW
    lo = np.where(empty, -np.inf, np.minimum(mf, mr))
    hi = np.where(empty, np.inf, np.maximum(mf, mr))
    low = np.partition(lo, K - 1, axis=0)[K - 1]
    high = -np.partition(-hi, K - 1, axis=0)[K - 1]
    return np.where(np.isfinite(low), low, np.nan), np.where(np.isfinite(high), high, np.nan)


def unit_bootstrap_interval(U: np.ndarray, W: np.ndarray, n_resamples: int,
                            rng: np.random.Generator, confidence: float,
                            allow_bca: bool = True):
    """Bootstrap interval of ``sum U / sum W`` resampling units: ``(low, high, bca)``, as
    :func:`bootstrap_interval` (whose closed-form acceleration is the jackknife of a mean;
    here the leave-one-unit-out jackknife of the ratio, equal to it when ``W`` is 1)."""
    n, k = U.shape
    counts_u = bootstrap_means(np.hstack([U, W]), n_resamples, rng)   # resampled means
    reps = counts_u[:, :k] / counts_u[:, k:]
    theta = U.sum(axis=0) / W.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        loo = (U.sum(axis=0) - U) / (W.sum(axis=0) - W)
    loo = np.where(np.isfinite(loo), loo, theta)
    return bootstrap_interval(None, reps, confidence, allow_bca, theta=theta,
                              jackknife=loo, n=n)
