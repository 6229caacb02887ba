"""Settling gate checks on the confidence sequence (raglab.sequential.settle): the three
outcomes of a fixed-n decision, the conditions of raglab.compare.settling, and the
decision error rates at the margin by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from raglab.compare.gates import Gate
from raglab.compare.settling import conditions_of
from raglab.sequential.settle import Settled, all_settled, settle
from raglab.stats.settle import Condition

ALPHA = 0.05
NON_INFERIOR = conditions_of(Gate(metric="faithfulness", rule="non_inferior", margin=0.05))
RISE = conditions_of(Gate(metric="false_answer_rate", rule="bound", max_increase=0.05,
                          by="interval"))


def test_identical_outputs_pass_after_96_cases():
    # K+ against -0.05 reaches 2 / alpha after 96 cases (test_cs.py works it out by hand)
    got = settle(np.zeros(228), NON_INFERIOR, ALPHA)
    assert (got.status, got.at, got.n) == ("pass", 96, 228)
    # after 228 cases K+ (capped bets c / m) excludes m while 1 + 0.75 (1/2 - m) / m >=
    # 40^(1/228): m <= 0.375 / (0.75 + 40^(1/228) - 1) = 0.48936, delta <= -0.02129,
    # whose grid point outwards is -0.022
    edge = 2 * 0.375 / (0.75 + 40 ** (1 / 228) - 1) - 1
    assert edge == pytest.approx(-0.02129, abs=1e-5)
    assert (got.low, got.high) == (pytest.approx(-0.022), pytest.approx(0.022))
    # a rise bounded by interval: the mirror
    assert settle(np.zeros(228), RISE, ALPHA).status == "pass"
    assert settle(np.zeros(95), NON_INFERIOR, ALPHA).status == "inconclusive"


def test_a_lower_is_better_metric_fails_when_the_sequence_shows_the_rise():
    d = np.random.default_rng(3).permutation(np.r_[np.ones(60), np.zeros(240)])  # +0.2
    got = settle(d, RISE, ALPHA)
    assert got.status == "fail" and got.at is not None and got.at < 300
    assert got.low > 0.05


def test_ten_percent_lost_fails_a_margin_of_005_given_enough_cases():
    d = np.random.default_rng(0).permutation(np.r_[-np.ones(50), np.zeros(450)])
    got = settle(d, NON_INFERIOR, ALPHA)
    assert got.status == "fail" and got.high < -0.05
    assert settle(d[:got.at - 1], NON_INFERIOR, ALPHA).status == "inconclusive"


def test_all_conditions_must_pass_and_one_breach_fails():
    both = [Condition("above", -0.05), Condition("below", 0.05)]
    assert settle(np.zeros(200), both, ALPHA).status == "pass"
    # a clear drop: met below 0.05, breached above -0.05
    d = np.random.default_rng(5).permutation(np.r_[-np.ones(100), np.zeros(200)])
    got = settle(d, both, ALPHA)
    assert got.status == "fail"
    only_below = settle(d, [Condition("below", 0.05)], ALPHA)
    assert only_below.status == "pass" and only_below.at is not None
    assert got.at is not None


def test_nothing_yet_is_inconclusive_and_no_condition_is_refused():
    assert settle([], NON_INFERIOR, ALPHA) == Settled("inconclusive", None, 0, -1.0, 1.0)
    with pytest.raises(ValueError, match="at least one condition"):
        settle([0.0], [], ALPHA)
    assert all_settled([settle(np.zeros(200), NON_INFERIOR, ALPHA)])
    assert not all_settled([settle(np.zeros(200), NON_INFERIOR, ALPHA),
                            settle([0.0], NON_INFERIOR, ALPHA)])


def _rates(p_loss: float, p_gain: float, n: int, runs: int, seed: int,
           target: float | None = None) -> tuple[float, float]:
    """Shares of runs that settle as pass / fail on a non_inferior margin 0.05."""
    rng = np.random.default_rng(seed)
    out = {"pass": 0, "fail": 0, "inconclusive": 0}
    for _ in range(runs):
        d = rng.choice([-1.0, 0.0, 1.0], size=n, p=[p_loss, 1 - p_loss - p_gain, p_gain])
        out[settle(d, NON_INFERIOR, ALPHA, interval=False, target=target).status] += 1
    return out["pass"] / runs, out["fail"] / runs


def test_error_rates_at_the_margin_and_unchanged_quick():
    # true change -margin (10% lost, 5% gained): a pass would be a wrong GO
    go, _ = _rates(0.10, 0.05, 300, 200, seed=1, target=150)
    # nothing changed (5% each way): a fail would be a wrong NO-GO
    _, no_go = _rates(0.05, 0.05, 300, 200, seed=2, target=150)
    assert go <= 0.05 and no_go <= 0.05


@pytest.mark.slow
@pytest.mark.parametrize("tuned", [False, True])
@pytest.mark.parametrize("n", [20, 100, 300, 600])
def test_error_rates_at_the_margin_and_unchanged(n, tuned):
    """4000 runs each, stopping whenever settled: GO at true change = -margin and NO-GO
    with nothing changed are each at most alpha / 2 (plus three simulation errors), with
    the anytime bets and with the bets tuned to half the cases (a sequential run's)."""
    limit = 0.025 + 3 * math.sqrt(0.025 * 0.975 / 4000)
    target = n / 2 if tuned else None
    go, _ = _rates(0.10, 0.05, n, 4000, seed=n, target=target)
    _, no_go = _rates(0.05, 0.05, n, 4000, seed=n + 1, target=target)
    assert go <= limit and no_go <= limit


@pytest.mark.slow
def test_peeking_at_a_fixed_n_interval_is_what_the_sequence_avoids():
    """At a true change of minus the margin, stopping at the first batch of 20 whose 95%
    score interval clears the margin gives a wrong GO well above 2.5% (about 7% in 300
    cases); the confidence sequence (its bets tuned to 150 cases, as a run of 300 tunes
    them), looked at after every case, stays below it."""
    from raglab.stats.score import paired_interval

    rng = np.random.default_rng(3)
    runs, n = 2000, 300
    looks = np.arange(20, n + 1, 20)
    peeked = sequence = 0
    for _ in range(runs):
        d = rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.10, 0.85, 0.05])
        gains = np.array([(d[:k] == 1).sum() for k in looks], dtype=float)
        losses = np.array([(d[:k] == -1).sum() for k in looks], dtype=float)
        low, _ = paired_interval(gains, losses, looks.astype(float), 0.95)
        peeked += bool(np.any(low > -0.05))
        sequence += settle(d, NON_INFERIOR, ALPHA, interval=False,
                           target=150).status == "pass"     # tuned as a run tunes it
    assert peeked / runs > 0.05
    assert sequence / runs <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / runs)


def test_the_limit_at_half_of_300_cases():
    """docs/sequential.md: at 150 of 300 cases with 10% of cases lost (margin 0.05), the
    gates' fixed-n check fails in 64.7% of runs and the most powerful level-2.5% test of
    a change of -0.05 in 67.8%: no valid procedure settles that NO-GO by half-way in more."""
    from scipy.stats import binom

    from tests.benchmarks.bench_sequential import half_way_power

    score, best = half_way_power(150)
    assert (round(score, 3), round(best, 3)) == (0.647, 0.678)
    # by hand: the most powerful test rejects from 14 losses of 150 (P = 1.87% at a 5%
    # loss rate), and at 13 with the probability that brings its level to 2.5%
    assert binom.sf(13, 150, 0.05) <= 0.025 < binom.sf(12, 150, 0.05)
    edge = (0.025 - binom.sf(13, 150, 0.05)) / binom.pmf(13, 150, 0.05)
    assert best == pytest.approx(binom.sf(13, 150, 0.1) + edge * binom.pmf(13, 150, 0.1))
    assert half_way_power(300)[0] == pytest.approx(0.898, abs=5e-4)   # the full run's
