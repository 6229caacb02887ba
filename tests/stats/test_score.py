"""Tango's score interval and test, the power of the paired pass/fail test, and the
bootstrap-t: known answers from published examples and independent implementations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom, norm

from raglab.stats import non_inferior, paired_table
from raglab.stats.paired import one_sided
from raglab.stats.score import (
    paired_pvalue,
    score_interval,
    score_mde,
    score_power,
    score_pvalue,
    score_z,
    weighted_counts,
)
from raglab.stats.studentized import bootstrap_t_interval, studentized_replicates

Z = norm.ppf(0.975)


def test_tango_interval_published_example():
    # Cavo et al. 2012 (Fagerland, Lydersen and Laake, Statistical Analysis of Contingency
    # Tables, ch. 8): n12 = 6, n21 = 16, N = 161; Tango's 95% CI -0.1240 to -0.0054
    low, high = score_interval(6, 16, 161)
    assert (6 - 16) / 161 == pytest.approx(-0.0621, abs=5e-5)
    assert low[0] == pytest.approx(-0.1240, abs=5e-5)
    assert high[0] == pytest.approx(-0.0054, abs=5e-5)


def test_score_statistic_by_hand():
    # g = 0, lost = 2, n = 100 at d0 = -0.05: B = -2 + 198 * -0.05 ... the restricted loss
    # rate solves 200 p^2 + B p + C = 0; by hand Z = (0 - 2 + 5) / sqrt(100 (2 p + d0 (1 - d0)))
    g, lost, n, d0 = 0.0, 2.0, 100.0, -0.05
    A, B, C = 2 * n, -g - lost + (2 * n - g + lost) * d0, -lost * d0 * (1 - d0)
    p = (np.sqrt(B * B - 4 * A * C) - B) / (2 * A)
    want = (g - lost - n * d0) / np.sqrt(n * (2 * p + d0 * (1 - d0)))
    assert score_z(g, lost, n, d0) == pytest.approx(want, rel=1e-12)
    assert score_pvalue(g, lost, n, d0, "greater") == pytest.approx(norm.sf(want), rel=1e-12)


def test_no_change_gives_an_interval_that_shrinks_with_n():
    for n in (4, 50, 500):
        low, high = score_interval(0, 0, n)
        assert high[0] == pytest.approx(Z * Z / (n + Z * Z), rel=1e-9) == -low[0]
    stat = paired_table(np.ones((50, 1)), np.ones((50, 1)), ["binary"], ["higher"])[0]
    assert stat.ci_method == "score" and stat.ci_low < 0 < stat.ci_high


def test_changes_all_one_way_leave_both_ends_informative():
    # SQuAD: 3 worse, none better, n = 87: the sign-flip inversion gave an end at exactly 0
    b = np.zeros((87, 1))
    c = np.zeros((87, 1))
    b[:3] = 1
    stat = paired_table(b, c, ["binary"], ["higher"])[0]
    assert stat.ci_low < -3 / 87 < 0 < stat.ci_high
    # the test the interval inverts: McNemar's score statistic -3 / sqrt(3) at 0
    assert stat.p_value == pytest.approx(2 * norm.sf(np.sqrt(3))) and stat.p_value > 0.05


def test_two_losses_in_a_hundred_is_not_non_inferior_at_005():
    b = np.ones((100, 1))
    c = np.ones((100, 1))
    c[:2] = 0
    stat = paired_table(b, c, ["binary"], ["higher"])[0]
    assert stat.ci_low < -0.05 and not non_inferior(stat, 0.05, "higher")
    # the matching one-sided test: H0 delta <= -0.05 is not rejected at 2.5%
    p = one_sided(b, c, [-0.05], ["greater"], kinds=["binary"])[0]
    assert 0.025 < p == pytest.approx(paired_pvalue(0, 2, 100, -0.05, "greater")[()])
    assert score_pvalue(0, 2, 100, -0.05, "greater") > 0.025      # and Tango's agrees


def test_interval_is_the_set_the_test_does_not_reject():
    rng = np.random.default_rng(5)
    for _ in range(50):
        n = int(rng.integers(5, 300))
        g, lost = rng.integers(0, n // 3 + 1, 2)
        low, high = score_interval(g, lost, n)
        for d0, inside in ((low[0] + 1e-7, True), (high[0] - 1e-7, True),
                           (low[0] - 1e-5, False), (high[0] + 1e-5, False)):
            if not -1 < d0 < 1:
                continue
            assert (abs(score_z(g, lost, n, d0)) < Z) == inside


def test_weighted_counts_equal_weights_are_the_plain_counts():
    gain = np.array([1, 0, 0, 1, 0, 0, 0, 0.0])
    loss = np.array([0, 1, 0, 0, 0, 0, 0, 0.0])
    g, lost, n = weighted_counts(gain, loss, np.full(8, 3.0))
    assert (g, lost, n) == pytest.approx((2.0, 1.0, 8.0))
    # changes in the heavy cases: fewer effective cases than Kish's figure
    w = np.array([10, 10, 1, 1, 1, 1, 1, 1.0])
    _, _, n_star = weighted_counts(gain, loss, w)
    assert n_star < w.sum() ** 2 / (w ** 2).sum()


def test_score_power_against_its_definition():
    # the exact power, summed by hand over every (gains, losses) outcome of n = 30: the
    # probability that the two-sided test (0 outside the interval) rejects
    n, psi, delta, alpha = 30, 0.2, 0.1, 0.05
    pg, pl = (psi + delta) / 2, (psi - delta) / 2
    total = 0.0
    for m in range(n + 1):
        for g in range(m + 1):
            p = paired_pvalue(g, m - g, n, 0.0, "two") if m else 1.0
            if p < alpha:
                total += (binom.pmf(m, n, psi) * binom.pmf(g, m, pg / psi))
    assert score_power(n, psi, delta, alpha) == pytest.approx(total, rel=1e-9)
    assert pl >= 0


def test_mde_has_the_stated_power_and_is_planned_at_the_needed_discordance():
    mde = score_mde(200, 0.1, 0.05)
    assert score_power(200, 0.1, mde, 0.05) == pytest.approx(0.8, abs=1e-6)
    # nothing changed: the plan uses the discordance a difference needs, not 0
    none = score_mde(50, 0.0, 0.05)
    assert none is not None and score_power(50, none, none, 0.05) == pytest.approx(0.8,
                                                                                   abs=1e-6)
    assert score_mde(3, 0.0, 0.05) is None    # 3 cases can never reach 5%


def test_bootstrap_t_matches_a_direct_implementation():
    rng = np.random.default_rng(8)
    d = rng.lognormal(-2, 1, 40) - 0.1
    U, W = d[:, None], np.ones((40, 1))
    B = 999
    theta, se, t = studentized_replicates(U, W, B, np.random.default_rng(3))
    # the same resamples drawn directly: one chunk of B x n indices
    idx = np.random.default_rng(3).integers(0, 40, size=(B, 40), dtype=np.int32)
    x = d[idx]
    t_direct = (x.mean(1) - d.mean()) / (x.std(1, ddof=1) / np.sqrt(40))
    assert theta[0] == pytest.approx(d.mean())
    assert se[0] == pytest.approx(d.std(ddof=1) / np.sqrt(40))
    np.testing.assert_allclose(np.sort(t[:, 0]), np.sort(t_direct), rtol=1e-9, atol=1e-12)
    low, high = bootstrap_t_interval(theta, se, t, 0.95)
    s = np.sort(t_direct)
    assert low[0] == pytest.approx(d.mean() - s[974] * se[0])   # (1 - 0.025) x 1000 - 1
    assert high[0] == pytest.approx(d.mean() - s[24] * se[0])


def test_same_data_same_pvalue_whatever_the_seed():
    rng = np.random.default_rng(1)
    b = rng.random((300, 3))
    c = b + rng.normal(0.02, 0.1, (300, 3))
    ps = {tuple(s.p_value for s in paired_table(b, c, ["share", "latency", "rank"],
                                                ["higher"] * 3, seed=seed))
          for seed in (0, 1, 2, 99)}
    assert len(ps) == 1
