"""The sweep-wide family (randomised Tukey HSD over every pair of jobs): known answers
against the exact permutation distribution, directions, ties, missing cases, and its
family-wise error on null sweeps."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from raglab.stats.family import tukey_hsd
from tests.stats.family_sim import familywise_error


def exact_pvalues(X: np.ndarray) -> np.ndarray:
    """Every within-case permutation of ``X`` enumerated: the share whose largest difference
    between two job means reaches each pair's observed difference."""
    n, k = X.shape
    perms = list(itertools.permutations(range(k)))
    means = X.mean(0)
    observed = np.abs(means[:, None] - means[None, :])
    ranges = []
    for choice in itertools.product(perms, repeat=n):
        m = np.array([X[i, list(p)] for i, p in enumerate(choice)]).mean(0)
        ranges.append(m.max() - m.min())
    r = np.array(ranges)
    return np.array([[np.mean(r >= o - 1e-12) for o in row] for row in observed])


def test_two_jobs_three_cases_by_hand():
    # job 0 passes every case, job 1 none: of the 2^3 swaps only "none" and "all" keep a
    # difference of 1, so the exact p is 2/8
    X = np.array([[1.0, 0.0]] * 3)
    res = tukey_hsd(X, n_permutations=20000, seed=1)
    assert res.p_adjusted[0, 1] == pytest.approx(0.25, abs=0.01)
    assert exact_pvalues(X)[0, 1] == 0.25


def test_matches_the_exact_permutation_distribution():
    X = np.array([[0.9, 0.2, 0.5], [1.0, 0.4, 0.3], [0.7, 0.1, 0.6], [0.8, 0.5, 0.2]])
    exact = exact_pvalues(X)          # (3!)^4 = 1296 permutations
    res = tukey_hsd(X, n_permutations=20000, seed=3)
    np.testing.assert_allclose(res.p_adjusted, exact, atol=0.012)
    # the +1 correction: never below 1 / (B + 1)
    assert res.p_adjusted.min() >= 1 / 20001


def test_clear_winner_is_a_singleton_best_group():
    rng = np.random.default_rng(0)
    X = (rng.random((120, 5)) < 0.5).astype(float)
    X[:, 3] = (rng.random(120) < 0.95)
    res = tukey_hsd(X, n_permutations=999, seed=0)
    assert res.best == 3 and res.best_group == [3]
    assert (np.delete(res.p_adjusted[3], 3) < 0.05).all()


def test_identical_jobs_are_all_in_the_best_group_with_p_1():
    X = np.tile(np.linspace(0, 1, 40)[:, None], (1, 4))
    res = tukey_hsd(X, n_permutations=500)
    assert res.best_group == [0, 1, 2, 3]
    assert (res.p_adjusted == 1.0).all()
    const = tukey_hsd(np.zeros((30, 3)), n_permutations=500)
    assert (const.p_adjusted == 1.0).all() and const.best_group == [0, 1, 2]


def test_lower_is_better_picks_the_smallest_mean():
    X = np.zeros((100, 3))
    X[:, 0] = 1.0
    X[:, 1] = 1.0
    res = tukey_hsd(X, n_permutations=999, higher_is_better=False)
    assert res.best == 2 and res.best_group == [2]
    assert tukey_hsd(X, n_permutations=999).best_group == [0, 1]


def test_cases_missing_in_a_job_are_left_out_and_counted():
    X = np.array([[1.0, 0.0], [1.0, np.nan], [np.nan, 0.0], [1.0, 0.0], [1.0, 0.0]])
    res = tukey_hsd(X, n_permutations=999)
    assert res.n == 3
    assert res.means.tolist() == [1.0, 0.0]
    assert res.p_adjusted[0, 1] == pytest.approx(0.25, abs=0.03)
    empty = tukey_hsd(np.full((4, 2), np.nan), n_permutations=10)
    assert empty.n == 0 and empty.best_group == [0, 1]
    # cases that all weigh 0 count for nothing: no case, as above (compare SWEEP skips the
    # metric instead of writing NaN means into compare.json)
    weightless = tukey_hsd(np.array([[1.0, 0.0], [0.0, 1.0]]), 10, weights=np.zeros(2))
    assert weightless.n == 0 and weightless.best_group == [0, 1]


def test_weights_and_seed():
    rng = np.random.default_rng(5)
    X = rng.random((60, 4))
    a = tukey_hsd(X, 999, seed=7)
    assert np.array_equal(a.p_adjusted, tukey_hsd(X, 999, seed=7).p_adjusted)
    # weight 2 on a case is the case twice, as far as the means go
    w = np.ones(60)
    w[:10] = 2.0
    weighted = tukey_hsd(X, 999, weights=w)
    np.testing.assert_allclose(weighted.means, np.vstack([X, X[:10]]).mean(0))


def test_familywise_error_on_null_sweeps_small():
    # 6 identical-in-distribution jobs, 100 correlated Bernoulli(0.6) cases; the slow test
    # below runs 2,000 sweeps
    assert familywise_error(sweeps=150, n_permutations=199) <= 0.09


@pytest.mark.slow
def test_familywise_error_on_null_sweeps():
    rate = familywise_error(sweeps=2000, n_permutations=499, seed=7)
    assert rate <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 2000)
