"""Prediction-powered intervals of a bounded mean: clipped to the range, and the exact bound
where every label is the same (a variance-based interval would have no width)."""

from __future__ import annotations

import numpy as np
import pytest

from raglab.stats.ppi import ppi_mean, ppi_stratified

Z2 = 1.959963984540054 ** 2     # z_{0.975} squared


def test_labels_that_all_agree_get_the_score_bound_not_a_point():
    # 35 labels, all yes; a judge that gives every case 1 (no information: lam 0). The
    # default (score) interval is Wilson's: 35 / (35 + z^2)
    est = ppi_mean([1.0] * 35, [1.0] * 35, [1.0] * 145, bounds=(0.0, 1.0))
    assert est.estimate == 1.0 and est.ci_high == 1.0
    assert est.ci_low == pytest.approx(35 / (35 + Z2), abs=1e-9)
    assert est.ci_low == pytest.approx(0.90110, abs=1e-5)
    # Hall's interval falls back on the exact bound: Clopper-Pearson's 0.025 ** (1 / 35)
    hall = ppi_mean([1.0] * 35, [1.0] * 35, [1.0] * 145, bounds=(0.0, 1.0),
                    interval="hall")
    assert hall.ci_low == pytest.approx(0.025 ** (1 / 35), abs=1e-12)
    assert hall.ci_low == pytest.approx(0.89997, abs=1e-5) and hall.ci_high == 1.0
    # without bounds the old behaviour: an interval of no width
    bare = ppi_mean([1.0] * 35, [1.0] * 35, [1.0] * 145)
    assert bare.ci_low == bare.ci_high == 1.0


def test_a_paired_difference_with_no_labelled_change_is_not_zero_width():
    d = [0.0] * 20
    # the score interval: Tango's with no change, +-z^2 / (n + z^2), as compare's rows
    est = ppi_mean(d, d, [0.0] * 60, bounds=(-1.0, 1.0))
    assert (est.ci_low, est.ci_high) == pytest.approx((-Z2 / (20 + Z2), Z2 / (20 + Z2)),
                                                      abs=1e-9)
    hall = ppi_mean(d, d, [0.0] * 60, bounds=(-1.0, 1.0), interval="hall")
    share = 1 - 0.025 ** (1 / 20)
    assert (hall.ci_low, hall.ci_high) == pytest.approx((-share, share), abs=1e-12)
    assert share == pytest.approx(0.1684, abs=1e-4)


def test_intervals_are_clipped_to_the_range():
    # 37 yes and one partial, a judge that gives every case 1: the skewness-corrected
    # interval's upper end passes 1
    y = [1.0] * 37 + [0.5]
    f = [1.0] * 38
    bare = ppi_mean(y, f, f + [1.0] * 100, interval="hall")
    assert bare.ci_high > 1.0
    est = ppi_mean(y, f, f + [1.0] * 100, bounds=(0.0, 1.0), interval="hall")
    assert est.ci_high == 1.0 and est.ci_low == pytest.approx(bare.ci_low, abs=1e-15)
    assert est.estimate == pytest.approx(bare.estimate, abs=1e-15)
    # the score interval never leaves the range
    score = ppi_mean(y, f, f + [1.0] * 100, bounds=(0.0, 1.0))
    assert 0.0 <= score.ci_low < score.estimate < score.ci_high <= 1.0


def test_a_judge_that_matched_every_label_is_not_taken_as_certain():
    # lam 1, every labelled human - judge is 0 and the judge gave every other case 1: the
    # labelled cases bound the share of cases where people and judge differ
    y = [1.0] * 37 + [0.5]
    judge_all = y + [1.0] * 100
    est = ppi_mean(y, y, judge_all, bounds=(0.0, 1.0))
    assert est.lam == 1.0 and est.se == 0.0 and est.estimate == 1.0
    # the score interval: the rectifier is 0 on all 38 labels; below, a case people fail
    # at the judge's mean, 0 - mean(f): Wilson's bound of 0 in 38 on that scale
    f_mean = sum(judge_all) / len(judge_all)
    assert est.ci_high == 1.0
    assert est.ci_low == pytest.approx(1.0 - f_mean * Z2 / (38 + Z2), abs=1e-9)
    hall = ppi_mean(y, y, judge_all, bounds=(0.0, 1.0), interval="hall")
    share = 1 - 0.025 ** (1 / 38)
    assert hall.ci_high == 1.0
    assert hall.ci_low == pytest.approx(hall.estimate - share, abs=1e-12)


def test_stratified_samples_whose_labels_all_agree_are_bounded_per_stratum():
    strata = {"a": ([1.0] * 12, [1.0] * 12, [1.0] * 40),
              "b": ([1.0] * 12, [1.0] * 12, [1.0] * 60)}
    est = ppi_stratified(strata, {"a": 40, "b": 60}, bounds=(0.0, 1.0))
    share = 0.4 * (1 - 0.0125 ** (1 / 12)) + 0.6 * (1 - 0.0125 ** (1 / 12))
    assert est.ci_high == 1.0 and est.ci_low == pytest.approx(1 - share, abs=1e-12)


def test_coverage_of_a_high_pass_rate_from_few_labels():
    """A pass/fail metric people pass 97% of the time, 35 labels of 145 cases, a judge that
    agrees with people 90% of the time: most samples hold no fail, or one. The bounded
    interval covers the true rate at least 95% of the time (it was 51% when all-yes samples
    gave a point)."""
    rng = np.random.default_rng(7)
    N, n, reps, hits = 145, 35, 2000, 0
    for _ in range(reps):
        y = (rng.random(N) < 0.97).astype(float)
        f = np.where(rng.random(N) < 0.9, y, 1 - y)
        idx = rng.choice(N, n, replace=False)
        est = ppi_mean(y[idx], f[idx], f, bounds=(0.0, 1.0))
        hits += est.ci_low <= y.mean() <= est.ci_high
    assert hits / reps >= 0.94  # 95% nominal; 2,000 replications (s.e. 0.5 points)


def test_the_plan_states_the_width_of_the_interval_reported_now():
    from raglab.stats.ppi_plan import labels_needed

    y, f = [1.0] * 37 + [0.5], [1.0] * 38
    plan = labels_needed(y, f, f + [1.0] * 100, width=0.1, bounds=(0.0, 1.0))
    est = ppi_mean(y, f, f + [1.0] * 100, bounds=(0.0, 1.0))
    assert plan.width_now == pytest.approx(est.ci_high - est.ci_low, abs=1e-15)
    # the skewed labels' interval is far wider than the symmetric one the plan assumes
    # (2 t se = 0.053 here), which the plan used to state as the width now
    assert plan.width_now > 0.09


def test_halls_interval_of_an_estimate_outside_the_range_holds_the_reported_estimate():
    # 60 labels all yes, a fixed lam of 1 and a judge that said no to 6 of them and yes to
    # the 240 others: the estimate 1.1 is reported as 1, and Hall's interval (its ends
    # both above 1 before) moves with it: it holds 1 and has width
    f = [1.0] * 54 + [0.0] * 6
    est = ppi_mean([1.0] * 60, f, f + [1.0] * 240, lam=1.0, bounds=(0.0, 1.0),
                   interval="hall")
    assert est.estimate == 1.0
    assert 0.0 <= est.ci_low < est.estimate <= est.ci_high <= 1.0
    bare = ppi_mean([1.0] * 60, f, f + [1.0] * 240, lam=1.0, interval="hall")
    assert bare.estimate == pytest.approx(1.1)
    assert est.ci_low == pytest.approx(bare.ci_low - 0.1, abs=1e-12)


@pytest.mark.parametrize("bounds", [(1.0, 0.0), (0.0, 0.0), (0.0, float("inf"))])
def test_bounds_must_be_a_range(bounds):
    with pytest.raises(ValueError, match="bounds must be two finite numbers"):
        ppi_mean([1.0] * 20, [1.0] * 20, [1.0] * 40, bounds=bounds)


def test_human_values_must_lie_within_the_bounds():
    with pytest.raises(ValueError, match="human values must lie within bounds"):
        ppi_mean([2.0] + [1.0] * 19, [1.0] * 20, [1.0] * 40, bounds=(0.0, 1.0))
    with pytest.raises(ValueError, match="human values must lie within bounds"):
        ppi_stratified({"a": ([1.0] * 11 + [-0.5], [1.0] * 12, [1.0] * 30)}, {"a": 30},
                       bounds=(0.0, 1.0))
