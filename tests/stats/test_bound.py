"""The score bound of a graded share in units of a scale (raglab.stats.bound): known
answers, the unchanged whole-step case, and one procedure with the one-sided test."""

from __future__ import annotations

import numpy as np
import pytest

from raglab.stats import one_sided, paired_table
from raglab.stats.bound import bound_scale
from raglab.stats.score import paired_interval, score_interval


def _small(n: int = 150, gains: int = 20, losses: int = 10, size: float = 0.03):
    base = np.full((n, 1), 0.5)
    cand = base.copy()
    cand[:gains, 0] += size
    cand[gains:gains + losses, 0] -= size
    return base, cand


def test_thirty_changes_of_three_points_by_hand():
    base, cand = _small()
    d = cand - base
    # s = (sum d^2 + 1) / (sum |d| + 1) = (30 x 0.0009 + 1) / (30 x 0.03 + 1)
    s = (30 * 0.03 ** 2 + 1) / (30 * 0.03 + 1)
    assert bound_scale(d, np.ones_like(d))[0] == pytest.approx(s, rel=1e-12)
    lo, hi = paired_interval(20 * 0.03 / s, 10 * 0.03 / s, 150.0)
    stat = paired_table(base, cand, ["share"], ["higher"])[0]
    assert stat.ci_method == "score-bound"
    assert (stat.ci_low, stat.ci_high) == (pytest.approx(s * lo[0], rel=1e-9),
                                           pytest.approx(s * hi[0], rel=1e-9))
    old_lo, old_hi = score_interval(20 * 0.03, 10 * 0.03, 150.0)   # Tango, mass as counts
    assert stat.ci_high - stat.ci_low < 0.61 * (old_hi[0] - old_lo[0])
    # the widths: 0.0554 before (Tango on the mass as counts), 0.0333 now
    assert old_hi[0] - old_lo[0] == pytest.approx(0.0554, abs=5e-4)
    assert stat.ci_high - stat.ci_low == pytest.approx(0.0333, abs=5e-4)


def test_whole_steps_and_no_change_keep_tangos_interval():
    base = np.zeros((60, 1))
    cand = base.copy()
    cand[:5, 0] = 1.0
    cand[5:7, 0] = -0.0          # ties
    base[7:9, 0] = 1.0           # two losses
    share = paired_table(base, cand, ["share"], ["higher"])[0]
    binary = paired_table(base, cand, ["binary"], ["higher"])[0]
    assert share.ci_method == "score-bound" and binary.ci_method == "score"
    assert (share.ci_low, share.ci_high) == (binary.ci_low, binary.ci_high)
    same = paired_table(base, base, ["share"], ["higher"])[0]
    lo, hi = paired_interval(0.0, 0.0, 60.0)
    assert (same.ci_low, same.ci_high) == (lo[0], hi[0])


def test_a_few_small_changes_barely_narrow_it():
    # two changes of 0.01 cannot rule out an unseen large one: s = 1.0002 / 1.02
    base, cand = _small(gains=2, losses=0, size=0.01)
    d = cand - base
    assert bound_scale(d, np.ones_like(d))[0] == pytest.approx(1.0002 / 1.02)


@pytest.mark.parametrize("gains,losses,size,weighted",
                         [(20, 10, 0.03, False), (3, 0, 0.2, False), (12, 30, 0.05, True),
                          (0, 4, 0.5, True)])
def test_the_one_sided_test_rejects_exactly_outside_the_interval(gains, losses, size,
                                                                 weighted):
    base, cand = _small(gains=gains, losses=losses, size=size)
    w = np.where(np.arange(150) % 3 == 0, 4.0, 1.0) if weighted else None
    stat = paired_table(base, cand, ["share"], ["higher"], weights=w)[0]
    assert stat.ci_method == "score-bound"
    eps = 1e-9
    for theta, side, rejects in ((stat.ci_low - eps, "greater", True),
                                 (stat.ci_low + eps, "greater", False),
                                 (stat.ci_high + eps, "less", True),
                                 (stat.ci_high - eps, "less", False),
                                 (0.9, "less", True), (0.9, "greater", False),
                                 (-0.9, "greater", True), (-0.9, "less", False)):
        p = one_sided(base, cand, [theta], [side], kinds=["share"], weights=w)[0]
        assert (p <= 0.025) == rejects, (theta, side, p, stat)


def test_the_scale_of_no_weight_is_1_not_nan():
    """Moments of no weight (every pseudo-count 0) give the scale 1, not 0/0."""
    import numpy as np

    from raglab.stats.bound import scale_of

    assert np.array_equal(scale_of([1.0, 0.0], [2.0, 0.0], [0.5, 0.0]), [0.6, 1.0])
