"""Paired pass/fail comparisons as one procedure: the p-value, the one-sided tests and the
MDE all belong to the interval (raglab.stats.score.paired_z and its inversion)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from raglab.stats import paired_table
from raglab.stats.paired import one_sided
from raglab.stats.score import (
    CONTINUITY,
    paired_interval,
    paired_z,
    score_interval,
    score_mde,
)


def _pairs(n: int, gained: int, lost: int) -> tuple[np.ndarray, np.ndarray]:
    base = np.zeros((n, 1))
    cand = np.zeros((n, 1))
    cand[:gained] = 1
    base[gained:gained + lost] = 1
    return base, cand


def test_four_gains_no_loss_of_150_the_test_and_the_interval_agree():
    # the audit's case: Tango's interval [+0.001, +0.067] beside McNemar's exact p = 0.125
    base, cand = _pairs(150, 4, 0)
    stat = paired_table(base, cand, ["binary"], ["higher"])[0]
    assert stat.test == "score" and stat.ci_method == "score"
    assert stat.p_value == pytest.approx(2 * norm.sf(2.0), rel=1e-12)     # 4 / sqrt(4)
    assert stat.p_value < 0.05 and stat.ci_low > 0
    assert stat.ci_low == pytest.approx(0.000545, abs=2e-6)
    assert stat.ci_high == pytest.approx(0.066921, abs=2e-6)


def test_pvalue_below_alpha_exactly_when_zero_is_outside_the_interval():
    rng = np.random.default_rng(11)
    for n in (37, 297):
        counts = rng.integers(0, 9, (30, 2))
        cols = [_pairs(n, int(g), int(lost)) for g, lost in counts]
        base = np.hstack([b for b, _ in cols])
        cand = np.hstack([c for _, c in cols])
        for confidence in (0.8, 0.95, 0.99):
            out = paired_table(base, cand, ["binary"] * 30, ["higher"] * 30,
                               confidence=confidence, n_resamples=200)
            for (g, lost), stat in zip(counts, out):
                outside = not stat.ci_low <= 0.0 <= stat.ci_high
                assert (stat.p_value < 1 - confidence) == outside, (n, g, lost, confidence)


def test_one_sided_tests_agree_with_the_interval_ends():
    base, cand = _pairs(120, 1, 5)
    stat = paired_table(base, cand, ["binary"], ["higher"])[0]
    for theta in (stat.ci_low - 1e-6, stat.ci_low + 1e-6, stat.ci_high - 1e-6,
                  stat.ci_high + 1e-6):
        less, greater = one_sided(np.hstack([base, base]), np.hstack([cand, cand]),
                                  [theta, theta], ["less", "greater"],
                                  kinds=["binary", "binary"])
        assert (less < 0.025) == (theta > stat.ci_high)
        assert (greater < 0.025) == (theta < stat.ci_low)


def _reference_z(g: float, lost: float, n: float, d0: float) -> float:
    """An independent scalar implementation: the restricted MLE by maximising the
    trinomial likelihood numerically, the third moment summed over the three outcomes,
    the skewness correction solved by root finding."""
    def dlogl(pl: float) -> float:          # derivative of the log-likelihood in p_loss
        pg = pl + d0
        return g / pg - 2 * (n - g - lost) / (1 - pg - pl) + lost / pl
    lo, hi = max(0.0, -d0) + 1e-13, (1 - d0) / 2 - 1e-13
    at_edge = g + lost == 0 or dlogl(lo) <= 0        # the maximum on the boundary
    pl = max(0.0, -d0) if at_edge else brentq(dlogl, lo, hi, xtol=1e-15)
    pg = pl + d0
    var = pg * (1 - d0) ** 2 + pl * (1 + d0) ** 2 + (1 - pg - pl) * d0 ** 2
    mu3 = pg * (1 - d0) ** 3 + pl * (-1 - d0) ** 3 + (1 - pg - pl) * (-d0) ** 3
    taper = min(1.0, n * abs(d0))
    num = g - lost - n * d0
    num = np.sign(num) * max(abs(num) - CONTINUITY * taper, 0.0)
    zc = num / np.sqrt(n * var)
    gamma = taper * n * mu3 / (6 * (n * var) ** 1.5)
    return zc if gamma == 0 else _solve(gamma, zc)


def _solve(gamma: float, zc: float) -> float:
    # the root of s + gamma (s^2 - 1) = zc on the branch through s = zc at gamma = 0
    vertex = -1 / (2 * gamma)
    f = lambda s: s + gamma * (s * s - 1) - zc          # noqa: E731
    reach = 2 * abs(vertex) + 100
    if gamma > 0:
        return brentq(f, vertex, vertex + reach, xtol=1e-14)
    return brentq(f, vertex - reach, vertex, xtol=1e-14)


@pytest.mark.parametrize("g, lost, n, d0", [
    (0, 2, 100, -0.05), (4, 0, 150, 0.02), (6, 16, 161, -0.1), (3, 1, 40, 0.2),
    (0, 0, 74, 0.05), (10.5, 3.25, 88.4, -0.01), (20, 30, 300, -0.1)])
def test_statistic_against_an_independent_implementation(g, lost, n, d0):
    assert paired_z(g, lost, n, d0) == pytest.approx(_reference_z(g, lost, n, d0),
                                                      rel=1e-7, abs=1e-9)


def test_at_zero_it_is_mcnemars_score_statistic():
    for g, lost, n in ((4, 0, 150), (7, 1, 20), (2.5, 0.75, 33.3)):
        assert paired_z(g, lost, n, 0.0) == pytest.approx((g - lost) / np.sqrt(g + lost))


def test_no_change_interval_stays_inside_005_at_74_cases():
    # Tango's z^2 / (n + z^2) = 0.04935 at n = 74; the corrected interval 0.04996
    z = norm.ppf(0.975)
    low, high = paired_interval(0, 0, 74)
    assert -0.05 < low[0] == -high[0] and high[0] < 0.05
    assert high[0] == pytest.approx(0.049958, abs=2e-6)
    assert high[0] - z * z / (74 + z * z) == pytest.approx(0.00061, abs=2e-5)
    # and an exact bound never holds less: P(no change | delta = high) <= 2.5%
    assert (1 - high[0]) ** 74 <= 0.025


def test_fractional_counts_give_a_monotone_interval():
    # weighted and graded columns pass fractional gain and loss masses
    n = 57.3
    gs = np.linspace(0, 6, 25)
    low, high = paired_interval(gs, np.full_like(gs, 1.7), np.full_like(gs, n))
    assert np.all(np.diff(low) > 0) and np.all(np.diff(high) > 0)
    low2, high2 = paired_interval(np.full_like(gs, 1.7), gs, np.full_like(gs, n))
    assert np.all(np.diff(low2) < 0) and np.all(np.diff(high2) < 0)
    assert np.all(low <= (gs - 1.7) / n) and np.all((gs - 1.7) / n <= high)
    # more cases, same shares: narrower
    lo_a, hi_a = paired_interval(2.0, 1.0, 60.0)
    lo_b, hi_b = paired_interval(4.0, 2.0, 120.0)
    assert hi_b[0] - lo_b[0] < hi_a[0] - lo_a[0]


def test_statistic_decreases_wherever_it_can_decide():
    # away from the estimate (|s| > 0.5, every level below 60%) the statistic decreases
    # in d0, so each interval end is one root and the bisection finds it
    rng = np.random.default_rng(3)
    d = np.linspace(-0.999, 0.999, 4001)
    for _ in range(300):
        n = float(rng.choice([5, 20, 74, 150, 300, 1000]) * rng.uniform(0.5, 1.5))
        g, lost = rng.uniform(0, n / 4, 2) * (rng.random(2) < 0.8)
        s = paired_z(g, lost, n, d)
        keep = np.isfinite(s[:-1]) & np.isfinite(s[1:]) & (np.minimum(abs(s[:-1]),
                                                                      abs(s[1:])) > 0.5)
        assert np.all(np.diff(s)[keep] <= 1e-12), (n, g, lost)


def test_weighted_binary_columns_get_the_score_test_on_effective_counts():
    rng = np.random.default_rng(4)
    base = (rng.random((200, 1)) < 0.6).astype(float)
    cand = np.where(rng.random((200, 1)) < 0.06, 1 - base, base)
    w = rng.uniform(0.5, 2.0, 200)
    stat = paired_table(base, cand, ["binary"], ["higher"], weights=w)[0]
    assert stat.test == "score"
    assert (stat.p_value < 0.05) == (not stat.ci_low <= 0 <= stat.ci_high)
    for conf in (0.5, 0.8):
        s2 = paired_table(base, cand, ["binary"], ["higher"], weights=w, confidence=conf)[0]
        assert s2.p_value == pytest.approx(stat.p_value)
        assert (s2.p_value < 1 - conf) == (not s2.ci_low <= 0 <= s2.ci_high)


def test_mde_is_never_below_what_the_no_change_interval_can_show():
    z = norm.ppf(0.975)
    for n in (20, 30, 50, 74, 100, 150, 300, 1000):
        mde = score_mde(n, 0.0, 0.05)
        assert mde is not None and mde > z * z / (n + z * z)
        # an unchanged run's interval: wider than the MDE's test needs, and valid (no
        # change has probability at most 2.5% when delta is its end)
        high = paired_interval(0, 0, n)[1][0]
        assert high < mde and (1 - high) ** n <= 0.025
        # near Tango's z^2 / (n + z^2): 0.0115 wider at n = 20, 0.0006 at 74
        assert high == pytest.approx(score_interval(0, 0, n)[1][0], rel=0.08 if n < 100
                                     else 0.015)
