"""The Monte Carlo sign-flip p-value is ``(b + 1) / (m + 1)`` (b of m resamples at least as
extreme as the observed mean difference): the observed sign vector counts as one of the
resamples, so the p-value is valid (under the null ``P(p <= x) <= x``), lies on the grid
``k / (m + 1)`` and is never 0, however few resamples reach the observed statistic."""

from __future__ import annotations

import numpy as np
import pytest

from raglab.stats import paired_table
from raglab.stats.resample import signflip_pvalues

N = 25  # 2**25 sign vectors: more than the resamples, so Monte Carlo, not enumeration


def _half_the_flips_reach_it() -> np.ndarray:
    # d = (1, 1, 0, ..., 0): |s1 + s2| reaches the observed 2 when s1 == s2, for half of
    # the sign vectors: the permutation p-value is exactly 1/2
    d = np.zeros((N, 1))
    d[:2] = 1.0
    return d


@pytest.mark.parametrize("m", [199, 999, 4000])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_monte_carlo_pvalue_is_b_plus_one_over_m_plus_one(m, seed):
    p, exact = signflip_pvalues(_half_the_flips_reach_it(), m, np.random.default_rng(seed))
    assert not exact
    k = p[0] * (m + 1)                       # the count of resamples, plus the observed one
    assert k == pytest.approx(round(k), abs=1e-6), (p[0], m)
    assert 1 <= round(k) <= m + 1
    assert abs(p[0] - 0.5) < 4 * (0.25 / m) ** 0.5 + 1 / m  # near the exact 1/2


def test_every_resample_reaching_the_statistic_gives_one():
    d = np.zeros((N, 1))
    d[0] = 1.0                               # |+-1| always reaches the observed 1
    p, exact = signflip_pvalues(d, 999, np.random.default_rng(0))
    assert not exact and p[0] == 1.0


def test_paired_table_reports_the_corrected_pvalue():
    b = np.zeros((N, 1))
    c = _half_the_flips_reach_it()
    stat = paired_table(b, c, ["share"], ["higher"], n_resamples=999)[0]
    assert stat.test == "permutation"
    assert stat.p_value > 0
    k = stat.p_value * 1000
    assert k == pytest.approx(round(k), abs=1e-6)
