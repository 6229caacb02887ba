"""Effective counts of weighted cases for the score intervals (``weighted_counts``): the
design effect of the discordance, Kish's figure as a ceiling, equal weights unweighted."""

from __future__ import annotations

import numpy as np
import pytest

from raglab.stats import paired_table
from raglab.stats.score import weighted_counts


def _heavy(n_gain: int, n_loss: int, light_gain: int = 0):
    """200 cases, the first 50 weigh 4: gains and losses among them (and light gains)."""
    w = np.r_[np.full(50, 4.0), np.ones(150)]
    gain, loss = np.zeros(200), np.zeros(200)
    gain[:n_gain] = 1
    loss[n_gain:n_gain + n_loss] = 1
    gain[50:50 + light_gain] = 1
    return gain, loss, w


@pytest.mark.parametrize("g,lost", [(8, 0), (7, 3), (1, 1), (0, 5)])
def test_changes_in_cases_of_one_weight_count_as_themselves(g, lost):
    # every change weighs 4: n* = sum w / 4 = 87.5 and the counts are the changes
    # themselves (the design effect of the difference gave 8.27 gains of 90.4 for 8 / 0)
    eg, el, n = weighted_counts(*_heavy(g, lost))
    assert n == pytest.approx(87.5, rel=1e-12)
    assert (eg, el) == (pytest.approx(g, rel=1e-12, abs=1e-12),
                        pytest.approx(lost, rel=1e-12, abs=1e-12))


def test_kish_is_the_ceiling_and_mixed_changes_sit_between():
    w = np.r_[np.full(50, 4.0), np.ones(150)]
    kish = w.sum() ** 2 / (w * w).sum()                  # 129.0
    _, _, n = weighted_counts(*_heavy(0, 0, light_gain=4))
    assert n == pytest.approx(kish)      # light changes alone would read as n* = 350
    _, _, n0 = weighted_counts(np.zeros(200), np.zeros(200), w)
    assert n0 == pytest.approx(kish)     # nothing changed
    g, lost, n = weighted_counts(*_heavy(3, 1, light_gain=4))
    # sum w c = 16 + 4, sum w^2 c = 64 + 4: n* = 350 * 20 / 68
    assert n == pytest.approx(350 * 20 / 68)
    assert (g, lost) == (pytest.approx(n * 16 / 350), pytest.approx(n * 4 / 350))


def test_graded_mass_is_bounded_like_the_unweighted_score_bound():
    # the effective variance sum w^2 c / W^2 bounds that of the graded difference
    rng = np.random.default_rng(4)
    w = rng.choice([1.0, 4.0], 120)
    d = np.where(rng.random(120) < 0.2, rng.uniform(-1, 1, 120), 0.0)
    g, lost, n = weighted_counts(np.maximum(d, 0), np.maximum(-d, 0), w)
    var_bound = (g + lost) / n ** 2
    assert var_bound >= (w * w * d * d).sum() / w.sum() ** 2
    assert (g - lost) / n == pytest.approx((w * d).sum() / w.sum())


def test_equal_weights_give_the_unweighted_counts_exactly():
    gain = np.array([1.0, 0.0, 0.25, 0.0, 0.1])
    loss = np.array([0.0, 0.5, 0.0, 0.0, 0.0])
    assert weighted_counts(gain, loss, np.full(5, 2.5)) == (gain.sum(), loss.sum(), 5.0)


def test_weights_of_one_give_the_unweighted_intervals_exactly():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(5, 300))
        b = (rng.random((n, 2)) < 0.6).astype(float)
        c = b.copy()
        flip = rng.random(n) < 0.1
        c[flip, 0] = 1 - c[flip, 0]
        levels = np.array([0, 0.25, 0.5, 0.75, 1, 1 / 3])
        b[:, 1] = rng.choice(levels[:5], n)
        c[:, 1] = np.where(rng.random(n) < 0.1, rng.choice(levels, n), b[:, 1])
        plain = paired_table(b, c, ["binary", "share"], ["higher"] * 2)
        ones = paired_table(b, c, ["binary", "share"], ["higher"] * 2, weights=np.ones(n))
        for u, v in zip(plain, ones):
            assert (u.ci_low, u.ci_high, u.ci_method, u.mde) == \
                (v.ci_low, v.ci_high, v.ci_method, v.mde)
