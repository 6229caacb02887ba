"""Null sweeps for the sweep-wide family (``raglab.stats.family``): ``k`` jobs identical in
distribution on ``n`` shared cases. Each case has its own difficulty ``p_i ~ Beta(6, 4)``
(mean 0.6, so the jobs' values of one case are correlated) and each job passes it with
probability ``p_i``, independently: no job differs from another, so any pair declared
separable is a false claim. Shared by the tests and the ``family`` benchmark."""

from __future__ import annotations

import numpy as np

from raglab.stats.family import tukey_hsd


def null_sweep(rng: np.random.Generator, n: int = 100, k: int = 6) -> np.ndarray:
    p = rng.beta(6.0, 4.0, size=(n, 1))
    return (rng.random((n, k)) < p).astype(np.float64)


def familywise_error(sweeps: int, n_permutations: int, n: int = 100, k: int = 6,
                     alpha: float = 0.05, seed: int = 2025) -> float:
    """The share of ``sweeps`` null sweeps where some pair has an adjusted p below
    ``alpha`` (a best group short of every job)."""
    rng = np.random.default_rng(seed)
    claims = 0
    for s in range(sweeps):
        res = tukey_hsd(null_sweep(rng, n, k), n_permutations, seed=s, alpha=alpha)
        claims += bool((res.p_adjusted < alpha).any())
    return claims / sweeps
