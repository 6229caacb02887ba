"""A family over every job of a sweep: the randomised Tukey HSD over all pairs of jobs.

The jobs of a sweep share their cases (a paired design): ``X`` is the ``cases x jobs``
matrix of one metric's per-case values. Under the null hypothesis that the jobs do not
differ, the job labels of each case's values are exchangeable, so each of ``B`` random
permutations shuffles every row of ``X`` on its own and records the largest difference
between two job means, ``max_i mean_i - min_j mean_j``. The adjusted p-value of the pair
``(i, j)`` is the share of permutations whose largest difference reaches the observed
``|mean_i - mean_j|``, with the ``+1`` correction: ``(1 + count) / (1 + B)`` (Carterette
2012, "Multiple testing in statistical analysis of systems-based information retrieval
experiments"; Sakai 2018, "Laboratory experiments in information retrieval"). Under the
complete null (no job differs from any other) the chance that any pair of the metric is
declared different is at most ``alpha`` (the single-step max-T principle of Westfall and
Young 1993); when some jobs do differ, the jobs that do not are judged against the range
of all ``k`` jobs, which is conservative for them in practice, though exchangeability of
a subset is then an assumption.

Ties and constant metrics give p = 1 (a permutation's largest difference is never below
0). With weights each mean is ``sum w x / sum w``; a permutation moves values between the
jobs of one case, never between cases, so the weights stay with their cases. Pure numpy;
seeded with ``numpy.random.default_rng([seed, n, k])`` so the same data and seed give the
same p-values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: permutations per block: bounds the memory of one block at ``CHUNK x n x k`` values
CHUNK = 256


@dataclass
class FamilyResult:
    means: np.ndarray            # each job's (weighted) mean over the cases used
    p_adjusted: np.ndarray       # k x k, symmetric, 1 on the diagonal
    best: int                    # the best job by the metric's direction
    best_group: list[int]        # the best job and every job not separable from it
    n: int                       # cases used (complete rows)


def max_range_null(X: np.ndarray, w: np.ndarray | None, n_permutations: int,
                   rng: np.random.Generator) -> np.ndarray:
    """The largest difference between two job means, ``max - min``, under each of
    ``n_permutations`` random within-case permutations of ``X`` (``cases x jobs``)."""
    n, k = X.shape
    weights = np.full(n, 1.0 / n) if w is None else w / w.sum()
    out = np.empty(n_permutations)
    for start in range(0, n_permutations, CHUNK):
        b = min(CHUNK, n_permutations - start)
        order = rng.random((b, n, k)).argsort(axis=2)
        perm = np.take_along_axis(np.broadcast_to(X, (b, n, k)), order, axis=2)
        means = np.einsum("bnk,n->bk", perm, weights)
        out[start:start + b] = means.max(axis=1) - means.min(axis=1)
    return out


def tukey_hsd(X: np.ndarray, n_permutations: int = 2000, seed: int = 0,
              higher_is_better: bool = True, alpha: float = 0.05,
              weights: np.ndarray | None = None) -> FamilyResult:
    """The randomised Tukey HSD of every pair of the columns (jobs) of ``X``; rows with a
    NaN (a case where the metric does not apply in some job) are left out. ``best_group``:
    the best job by the direction (``higher_is_better``; the first of equal means) and
    every job whose adjusted p-value against it is at least ``alpha``."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] < 2:
        raise ValueError("X must be a cases x jobs matrix with two jobs or more")
    if n_permutations < 1:
        raise ValueError("n_permutations must be positive")
    keep = ~np.isnan(X).any(axis=1)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)[keep]
    X = X[keep]
    n, k = X.shape
    if n == 0 or (w is not None and not w.sum() > 0):  # no case counts: nothing to test
        return FamilyResult(np.full(k, np.nan), np.ones((k, k)), 0, list(range(k)), 0)
    means = X.mean(axis=0) if w is None else (w @ X) / w.sum()
    observed = np.abs(means[:, None] - means[None, :])
    scale = float(np.abs(X).max()) or 1.0
    tol = 1e-12 * scale          # a difference below rounding error is a tie
    null = max_range_null(X, w, n_permutations, np.random.default_rng([seed, n, k]))
    null.sort()
    # count of permutations with max >= observed - tol, for each pair
    count = n_permutations - np.searchsorted(null, observed - tol, side="left")
    p = (1.0 + count) / (1.0 + n_permutations)
    p[observed <= tol] = 1.0
    np.fill_diagonal(p, 1.0)
    best = int(np.argmax(means) if higher_is_better else np.argmin(means))
    group = [j for j in range(k) if j == best or p[best, j] >= alpha]
    return FamilyResult(means, p, best, group, n)


__all__ = ["FamilyResult", "tukey_hsd", "max_range_null", "CHUNK"]
