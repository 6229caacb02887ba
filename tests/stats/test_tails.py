"""Permutation p-values below the Monte Carlo resolution: the saddlepoint tail.

With 2,000 random sign vectors a Monte Carlo p-value cannot go below 1/2001, so a Holm
adjustment over a family of more than 100 rows could never find a permutation-tested
difference significant. Below 10 exceedances the p-value comes from the saddlepoint
approximation of the same permutation distribution; these tests hold it to exact
enumeration and to long Monte Carlo runs.
"""

from __future__ import annotations

import numpy as np
import pytest

from raglab.stats import adjust_pvalues, paired_table
from raglab.stats.resample import lattice_step, saddlepoint_tail

N_EXACT = 18


@pytest.fixture(scope="module")
def sign_bits():
    codes = np.arange(2 ** N_EXACT)[:, None]
    return ((codes >> np.arange(N_EXACT)) & 1).astype(np.float64)


@pytest.mark.parametrize("shape", ["normal", "lognormal"])
def test_saddlepoint_tail_against_enumeration(sign_bits, shape):
    rng = np.random.default_rng(4)
    d = {"normal": rng.normal(0, 1, N_EXACT), "lognormal": rng.lognormal(0, 1, N_EXACT)}[shape]
    d = np.abs(d)
    null = d.sum() - 2.0 * (sign_bits @ d)           # every sign vector's sum
    xs = np.array([0.5, 0.7, 0.85, 0.95]) * d.sum()
    exact = np.array([(null >= x - 1e-9).mean() for x in xs])
    approx = saddlepoint_tail(np.repeat(d[:, None], len(xs), axis=1), xs)
    assert exact.min() < 1e-4                        # deep in the tail
    # at n = 18 the far tail holds a few dozen of the 262,144 sign vectors, which a
    # continuous approximation smooths; large n, where it is used, has no such problem
    np.testing.assert_allclose(approx, exact, rtol=0.15)


def _lattice_tail(steps: np.ndarray, x: int) -> float:
    """Exact P(sum s_i k_i >= x) for nonnegative integers k_i, by convolution."""
    off = int(steps.sum())
    p = np.zeros(2 * off + 1)
    p[off] = 1.0
    for v in steps[steps > 0]:
        q = np.zeros_like(p)
        q[:len(p) - v] += 0.5 * p[v:]
        q[v:] += 0.5 * p[:len(p) - v]
        p = q
    return float(p[off + x:].sum())


@pytest.mark.parametrize("n", [60, 300])
def test_saddlepoint_tail_on_a_lattice_against_convolution(n):
    # graded differences in steps of 0.1: the sum is a lattice of span 0.2
    rng = np.random.default_rng(3)
    steps = np.abs(rng.normal(0, 3, n)).round().astype(int)
    d = steps / 10.0
    sd = np.sqrt((steps.astype(float) ** 2).sum())
    for z in (2.5, 3.5, 4.5, 5.5):
        x = int(np.ceil(z * sd))
        x += (x - int(steps.sum())) % 2                # a value the sum can take
        exact = _lattice_tail(steps, x)
        approx = saddlepoint_tail(d[:, None], np.array([x / 10.0]))[0]
        assert approx == pytest.approx(exact, rel=0.05), (z, exact, approx)


def test_lattice_step():
    D = np.array([[0.2, 1.5, 0.1234567891, 3.0, 1234567.891],
                  [0.3, 0.0, 0.5, 6.0, 2.0],
                  [0.0, 4.5, 0.2, 9.0, 1.0]])
    D[:, :2] = (D[:, :2] + 0.7) - 0.7                # differences carry rounding noise
    np.testing.assert_allclose(lattice_step(D), [0.1, 1.5, 0.0, 3.0, 0.001])
    assert lattice_step(np.array([[1e-7], [np.pi]]))[0] == 0.0


def test_saddlepoint_edges():
    d = np.array([[0.0, 1.0], [2.0, 1.0], [3.0, 0.0]])
    np.testing.assert_allclose(saddlepoint_tail(d, np.array([5.0, 2.0])), [0.25, 0.25])
    assert saddlepoint_tail(d, np.array([4.0, 2.0]))[0] < 0.5
    assert saddlepoint_tail(d, np.array([0.0, 0.0])).tolist() == [0.5, 0.5]


def test_tail_pvalue_continues_the_monte_carlo_one():
    # a p-value near 0.0007: 2,000 resamples see about 1.4 exceedances (saddlepoint path),
    # 200,000 see about 140 (Monte Carlo path, standard error ~8%)
    rng = np.random.default_rng(21)
    n = 100
    b = rng.random(n)
    e = rng.normal(0.0, 0.2, n)
    c = b + e - e.mean() + 3.4 * e.std(ddof=1) / np.sqrt(n)   # t = 3.4 exactly
    short = paired_table(b[:, None], c[:, None], ["share"], ["higher"])[0]
    long = paired_table(b[:, None], c[:, None], ["share"], ["higher"], n_resamples=200_000)[0]
    assert short.p_value < 10 / 2001 and long.p_value > 100 / 200_001
    assert short.p_value == pytest.approx(long.p_value, rel=0.25)


def test_small_n_far_tail_is_enumerated():
    # n = 16 > log2(2000): Monte Carlo, then exact enumeration for the far tail
    d = np.linspace(0.5, 2.0, 16)
    stat = paired_table(np.zeros((16, 1)), d[:, None], ["share"], ["higher"])[0]
    assert stat.test == "permutation" and stat.p_value == 2 / 2 ** 16


def test_strong_effects_survive_a_large_holm_family():
    rng = np.random.default_rng(2)
    n, k = 2000, 150
    base = rng.random((n, k))
    cand = base + rng.normal(0.05, 0.2, (n, k))    # z about 11
    stats = paired_table(base, cand, ["share"] * k, ["higher"] * k)
    p = np.array([s.p_value for s in stats])
    assert (p > 0).all() and (p < 1e-12).all()
    adjusted = adjust_pvalues(list(p) * 51)          # 150 metrics x 51 slices
    assert max(adjusted) < 0.05


def test_p_values_never_underflow_to_zero():
    n = 20000
    rng = np.random.default_rng(0)
    base = rng.random((n, 2))
    cand = base + 0.5
    cand[:, 1] = 1.0
    base[:, 1] = 0.0
    stats = paired_table(base, cand, ["share", "binary"], ["higher", "higher"])
    assert all(0.0 < s.p_value < 1e-300 for s in stats)
