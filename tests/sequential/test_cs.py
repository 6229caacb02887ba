"""The betting confidence sequence (raglab.sequential.cs): hand-computed capitals and
bets, widths against the fixed-n order, and time-uniform coverage by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from raglab.sequential.cs import C, bets, confidence_sequence, crossings, log_capitals

ALPHA = 0.05


def test_bets_by_hand():
    # x = [0.5, 1.0]: lam_1 reads the prior variance 1/4; mu_1 = (1/2 + 1/2) / 2 = 1/2,
    # s2_1 = (1/4 + 0) / 2 = 1/8, so lam_2 = sqrt(2 log 40 / (1/8 * 2 * log 3))
    lam = bets(np.array([0.5, 1.0]), ALPHA)
    assert lam[0] == pytest.approx(math.sqrt(2 * math.log(40) / (0.25 * 1 * math.log(2))))
    assert lam[1] == pytest.approx(math.sqrt(2 * math.log(40) / (0.125 * 2 * math.log(3))))


def test_capitals_by_hand():
    # d = [0, 1] -> x = [0.5, 1]; against delta = 0 (m = 1/2) both bets are capped at
    # c / m = 1.5: K+ = (1 + 0) (1 + 1.5 * 0.5) = 1.75, K- = (1 - 0) (1 - 1.5 * 0.5) = 0.25
    up, down = log_capitals([0.0, 1.0], [0.0], ALPHA)
    assert C == 0.75
    assert np.exp(up[:, 0]) == pytest.approx([1.0, 1.75])
    assert np.exp(down[:, 0]) == pytest.approx([1.0, 0.25])


def test_identical_outputs_cross_a_margin_when_the_capital_reaches_2_over_alpha():
    # every d = 0: x = 1/2 = mu_t, s2_t = 1/(4 (t + 1)), lam_t = sqrt(29.5 / log(1 + t))
    # stays above the cap c / m (m = 0.475 for delta = -0.05), so
    # K+_t = (1 + 0.75 * 0.025 / 0.475)^t reaches 40 at t = ceil(log 40 / log 1.03947) = 96
    expected = math.ceil(math.log(40) / math.log1p(0.75 * 0.025 / 0.475))
    assert expected == 96
    above, below = crossings(np.zeros(200), [-0.05], ALPHA)[0]
    assert (above, below) == (96, None)
    above, below = crossings(np.zeros(200), [0.05], ALPHA)[0]
    assert (above, below) == (None, 96)
    low, high = confidence_sequence(np.zeros(200), ALPHA)
    assert low[94] < -0.05 and high[94] > 0.05     # after 95 cases: not yet
    assert low[95] == pytest.approx(-0.05) and high[95] == pytest.approx(0.05)


def test_sequence_narrows_and_holds_every_value_it_did_not_exclude():
    d = np.random.default_rng(1).choice([-1.0, 0.0, 1.0], size=150, p=[0.1, 0.8, 0.1])
    low, high = confidence_sequence(d, ALPHA)
    assert np.all(np.diff(low) >= 0) and np.all(np.diff(high) <= 0)
    assert np.all(low < d.mean()) and np.all(high > d.mean())
    (above, below), = crossings(d, [low[-1] + 0.002], ALPHA)
    assert above is None   # just inside the sequence: never excluded


def test_width_is_of_the_fixed_n_order_and_shrinks_like_sqrt_loglog_n_over_n():
    # fair +-1 differences (the largest variance): a confidence sequence cannot be narrower
    # than the fixed-n normal interval, and stays within twice Hoeffding's at n = 300
    rng = np.random.default_rng(7)
    d = rng.choice([-1.0, 1.0], size=2000)
    low, high = confidence_sequence(d, ALPHA)
    half = (high - low) / 2
    for n in (100, 300):
        normal = 1.96 / math.sqrt(n)
        hoeffding = math.sqrt(2 * math.log(2 / ALPHA) / n)
        assert normal < half[n - 1] < 2 * hoeffding
    # from 500 to 2000 cases: sqrt(1/4) times a slowly growing log factor (mean of 20)
    ratios = []
    for seed in range(20):
        d = np.random.default_rng(seed).choice([-1.0, 1.0], size=2000)
        low, high = confidence_sequence(d, ALPHA, step=0.01)
        ratios.append((high[1999] - low[1999]) / (high[499] - low[499]))
    assert 0.5 < float(np.mean(ratios)) < 0.65


def test_refuses_differences_out_of_range():
    with pytest.raises(ValueError, match=r"within \[-1, 1\]"):
        log_capitals([0.5, 1.5], [0.0], ALPHA)
    with pytest.raises(ValueError, match="finite"):
        log_capitals([float("nan")], [0.0], ALPHA)


def _miss_rates(draw, mean: float, n: int, runs: int, seed: int) -> tuple[float, float]:
    """Shares of runs in which the sequence ever lay wholly above / below the true mean in
    the first ``n`` cases."""
    rng = np.random.default_rng(seed)
    above = below = 0
    for _ in range(runs):
        (a, b), = crossings(draw(rng, n), [mean], ALPHA)
        above += a is not None
        below += b is not None
    return above / runs, below / runs


def _few_changed(p_loss: float, p_gain: float):
    def draw(rng, n):
        return rng.choice([-1.0, 0.0, 1.0], size=n, p=[p_loss, 1 - p_loss - p_gain, p_gain])
    return draw, p_gain - p_loss


def _graded(rng, n):       # [0, 1] scores: most cases unchanged, some move by a little
    moved = rng.random(n) < 0.3
    return np.where(moved, np.clip(rng.normal(-0.05, 0.3, n), -1, 1), 0.0)


def _graded_mean() -> float:
    rng = np.random.default_rng(123)
    return float(np.mean(_graded(rng, 2_000_000)))


SCENARIOS = {
    "nothing changed, 10% changed": _few_changed(0.05, 0.05),
    "drop of 0.05": _few_changed(0.10, 0.05),
    "few changed (2%)": _few_changed(0.015, 0.005),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_time_uniform_coverage_quick(name):
    draw, mean = SCENARIOS[name]
    up, down = _miss_rates(draw, mean, 300, 300, seed=11)
    # each side at alpha / 2 = 0.025 (300 runs: a generous allowance for chance)
    assert up <= 0.05 and down <= 0.05


@pytest.mark.slow
@pytest.mark.parametrize("n", [20, 100, 300])
@pytest.mark.parametrize("name", [*SCENARIOS, "graded"])
def test_time_uniform_coverage(name, n):
    """4000 runs: the share that EVER misses the mean, each side, is at most alpha / 2 plus
    three standard errors of the simulation."""
    draw, mean = (_graded, _graded_mean()) if name == "graded" else SCENARIOS[name]
    up, down = _miss_rates(draw, mean, n, 4000, seed=n)
    limit = 0.025 + 3 * math.sqrt(0.025 * 0.975 / 4000)
    assert up <= limit and down <= limit


def _by_the_definition(d: list[float], delta: float, alpha: float) -> tuple[float, float]:
    """``(log K+, log K-)`` after every case, case by case as Waudby-Smith & Ramdas define
    the hedged capital with predictable plug-in bets (the module docstring's formulas)."""
    m = (1 + delta) / 2
    xs, mus = [], []
    up = down = 0.0
    s2_prev = 0.25
    for t, di in enumerate(d, start=1):
        x = (1 + di) / 2
        lam = math.sqrt(2 * math.log(2 / alpha) / (s2_prev * t * math.log(1 + t)))
        up += math.log(1 + min(lam, C / m) * (x - m))
        down += math.log(1 - min(lam, C / (1 - m)) * (x - m))
        xs.append(x)
        mus.append((0.5 + sum(xs)) / (t + 1))
        s2_prev = (0.25 + sum((a - b) ** 2 for a, b in zip(xs, mus))) / (t + 1)
    return up, down


def test_the_vectorised_capitals_are_the_definitions():
    rng = np.random.default_rng(4)
    d = np.clip(rng.normal(0.0, 0.4, 60), -1, 1)
    deltas = [-0.3, -0.05, 0.0, 0.2]
    up, down = log_capitals(d, deltas, ALPHA)
    for j, delta in enumerate(deltas):
        assert (up[-1, j], down[-1, j]) == pytest.approx(_by_the_definition(list(d), delta,
                                                                          ALPHA))


# ---- bets tuned to the run's size -------------------------------------------------------

def test_tuned_bets_by_hand():
    # target N = 2: lam_t = sqrt(2 log 40 / (s2_{t-1} min(t log(1 + t), 2))); t log(1 + t)
    # is log 2 = 0.69 at t = 1 (below N) and 2 log 3 = 2.20 at t = 2 (above N)
    lam = bets(np.array([0.5, 1.0, 0.0]), ALPHA, target=2.0)
    assert lam[0] == pytest.approx(math.sqrt(2 * math.log(40) / (0.25 * math.log(2))))
    assert lam[1] == pytest.approx(math.sqrt(2 * math.log(40) / (0.125 * 2)))
    # a target beyond t log(1 + t) changes nothing
    x = np.random.default_rng(2).random(50)
    assert np.array_equal(bets(x, ALPHA, target=1e9), bets(x, ALPHA))
    with pytest.raises(ValueError, match="target"):
        bets(x, ALPHA, target=0.0)


def test_tuned_bets_settle_a_clear_loss_sooner_and_identical_outputs_as_before():
    d = np.random.default_rng(0).permutation(np.r_[-np.ones(30), np.zeros(270)])
    (_, untuned), = crossings(d, [-0.05], ALPHA)
    (_, tuned), = crossings(d, [-0.05], ALPHA, target=150)
    assert tuned is not None and (untuned is None or tuned < untuned)
    # identical outputs: the capped bets were already the largest allowed
    assert crossings(np.zeros(200), [-0.05], ALPHA, target=150)[0] == (96, None)


@pytest.mark.slow
@pytest.mark.parametrize("n", [20, 100, 300])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_time_uniform_coverage_with_tuned_bets(name, n):
    """The bets tuned to half the cases (as a sequential run tunes them): 4000 runs, the
    share that EVER misses the mean, each side, at most alpha / 2 plus three simulation
    errors."""
    draw, mean = SCENARIOS[name]
    rng = np.random.default_rng(n + 100)
    above = below = 0
    for _ in range(4000):
        (a, b), = crossings(draw(rng, n), [mean], ALPHA, target=n / 2)
        above += a is not None
        below += b is not None
    limit = 0.025 + 3 * math.sqrt(0.025 * 0.975 / 4000)
    assert above / 4000 <= limit and below / 4000 <= limit


# ---- weights ------------------------------------------------------------------------------

def test_weights_of_one_are_the_unweighted_sequence_exactly():
    d = np.clip(np.random.default_rng(8).normal(0.0, 0.4, 80), -1, 1)
    for target in (None, 40.0):
        up, down = log_capitals(d, [-0.1, 0.0, 0.1], ALPHA, target)
        wu, wd = log_capitals(d, [-0.1, 0.0, 0.1], ALPHA, target, np.ones(80))
        assert np.array_equal(up, wu) and np.array_equal(down, wd)


def test_weighted_capital_by_hand():
    # d = [1, -1], w = [1, 0.5] -> x = [1, 0]; against delta = 0 (m = 1/2) the first bet is
    # capped at c / m = 1.5: K+_1 = 1 + 1.5 * 1 * 0.5 = 1.75. Then mu_1 = (1/2 + 1) / 2 =
    # 3/4, s2_1 = (1/4 + (1 - 3/4)^2) / 2 = 5/32, lam_2 = sqrt(2 log 40 / (5/32 * 2 log 3))
    # = 7.33 capped at 1.5: K+_2 = 1.75 (1 + 1.5 * 0.5 * (0 - 1/2)) = 1.75 * 0.625
    up, down = log_capitals([1.0, -1.0], [0.0], ALPHA, weights=[1.0, 0.5])
    assert np.exp(up[:, 0]) == pytest.approx([1.75, 1.75 * 0.625])
    assert np.exp(down[:, 0]) == pytest.approx([0.25, 0.25 * 1.375])
    lam = bets(np.array([1.0, 0.0]), ALPHA, weights=np.array([1.0, 0.5]))
    assert lam[1] == pytest.approx(math.sqrt(2 * math.log(40) / (5 / 32 * 2 * math.log(3))))
    with pytest.raises(ValueError, match=r"weights must lie in \[0, 1\]"):
        log_capitals([0.0], [0.0], ALPHA, weights=[2.0])
    with pytest.raises(ValueError, match="2 weights for 1"):
        log_capitals([0.0], [0.0], ALPHA, weights=[1.0, 1.0])


def _weighted_draw(rng, n):
    """Heavy cases (weight 1, a quarter of them) lose 20% of the time; light ones (weight
    0.2) gain 10% of the time: the weighted mean is far from the unweighted one."""
    heavy = rng.random(n) < 0.25
    w = np.where(heavy, 1.0, 0.2)
    u = rng.random(n)
    d = np.where(heavy, np.where(u < 0.2, -1.0, 0.0), np.where(u < 0.1, 1.0, 0.0))
    return d, w


#: E[w d] / E[w] of :func:`_weighted_draw`: (0.25 * 1 * -0.2 + 0.75 * 0.2 * 0.1) / 0.4
WEIGHTED_MEAN = (0.25 * -0.2 + 0.75 * 0.2 * 0.1) / (0.25 + 0.75 * 0.2)


def _weighted_miss(n: int, runs: int, seed: int, target=None) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    above = below = 0
    for _ in range(runs):
        d, w = _weighted_draw(rng, n)
        (a, b), = crossings(d, [WEIGHTED_MEAN], ALPHA, target, w)
        above += a is not None
        below += b is not None
    return above / runs, below / runs


def test_weighted_coverage_quick_and_the_unweighted_mean_is_excluded():
    assert WEIGHTED_MEAN == pytest.approx(-0.0875)
    up, down = _weighted_miss(300, 300, seed=21, target=150)
    assert up <= 0.05 and down <= 0.05
    # the unweighted mean (-0.05 + 0.075 = +0.025) is not what it estimates
    d, w = _weighted_draw(np.random.default_rng(5), 600)
    low, high = confidence_sequence(d, ALPHA, weights=w)
    assert high[-1] < 0.025 < float(np.mean(d)) + 0.05


@pytest.mark.slow
@pytest.mark.parametrize("n", [20, 100, 300])
def test_weighted_time_uniform_coverage(n):
    """Unequal weights, 4000 runs: the weighted mean is ever excluded, each side, at most
    alpha / 2 plus three simulation errors (anytime and tuned bets)."""
    limit = 0.025 + 3 * math.sqrt(0.025 * 0.975 / 4000)
    for target in (None, n / 2):
        up, down = _weighted_miss(n, 4000, seed=n + 7, target=target)
        assert up <= limit and down <= limit


def test_capital_stays_positive_for_every_threshold_bet_and_weight():
    # the largest bets (a target of one case, extreme plug-in variance) against every
    # hypothesised mean, the ends of [-1, 1] and beyond (a margin or bound past them),
    # with weights in [0, 1]: each factor of the capital is at least 1 - c > 0
    rng = np.random.default_rng(5)
    d = rng.choice([-1.0, 0.0, 1.0], size=400)
    deltas = np.r_[np.linspace(-1.0, 1.0, 201), -1.5, 1.5, -1.0 + 1e-12, 1.0 - 1e-12]
    for target in (None, 1.0, 0.5, 1e6):
        for w in (None, rng.random(400), np.r_[np.zeros(200), np.ones(200)]):
            for side in log_capitals(d, deltas, 0.05, target, w):
                assert np.isfinite(side).all()
                steps = np.diff(side, axis=0, prepend=0.0)   # log of each case's factor
                assert steps.min() >= math.log(1 - C) - 1e-9
