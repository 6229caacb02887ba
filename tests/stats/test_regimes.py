"""Where a change moves few cases: the pass/fail statistics against their goals (issue
table in docs/statistics.md), through the functions compare and decide run.

Goals, each within 2 Monte Carlo standard errors: coverage of the 95% interval at least
94% in every cell; non-inferiority false passes at a true difference of -margin at most
2.5%; type-I error of the two-sided test at most 5%; power at the printed MDE 78-82%;
weighted coverage at least 94%.
"""

from __future__ import annotations

import pytest

from tests.stats.regimes import (
    NS,
    SHARES,
    SMALL_GRID,
    WEIGHTED_GRID,
    binary_cell,
    deltas,
    mc_se,
    power_at_mde,
    share_cell,
    small_share_cell,
    weighted_cell,
    weighted_heavy_cell,
)

pytestmark = pytest.mark.slow
K = 2000


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("q", SHARES)
def test_binary_cells_meet_their_goals(n, q):
    for _, delta in deltas(q):
        cell = binary_cell(n, q, delta, K, seed=1)
        assert cell["coverage"] >= 0.94 - 2 * mc_se(0.94, K), cell
        if "type1" in cell:
            assert cell["type1"] <= 0.05 + 2 * mc_se(0.05, K), cell
        if "ni_pass" in cell:
            assert cell["ni_pass"] <= 0.025 + 2 * mc_se(0.025, K), cell
            assert cell["not_worse_reject"] <= 0.025 + 2 * mc_se(0.025, K), cell
        if cell["changed"] >= 10:
            # enough changed cases: not over-covering either
            assert cell["coverage"] <= 0.96 + 2 * mc_se(0.96, K), cell


@pytest.mark.parametrize("n,q", [(50, 0.06), (150, 0.02), (150, 0.06), (150, 0.30),
                                 (500, 0.02), (500, 0.06), (500, 0.30)])
def test_power_at_the_printed_mde_is_80_percent(n, q):
    k = 4000
    mde, power = power_at_mde(n, q, k, seed=2)
    assert mde is not None and mde > 0
    assert 0.78 - 2 * mc_se(0.8, k) <= power <= 0.82 + 2 * mc_se(0.8, k), (mde, power)


@pytest.mark.parametrize("n", [200, 600])
@pytest.mark.parametrize("delta", [0.0, 0.04])
def test_weighted_sparse_changes_by_stratum_keep_coverage(n, delta):
    cell = weighted_cell(n, K, seed=3, delta=delta)
    assert cell["coverage"] >= 0.94 - 2 * mc_se(0.94, K), cell


@pytest.mark.parametrize("frac,qh,ql,ph", WEIGHTED_GRID)
def test_changes_in_heavy_cases_keep_coverage(frac, qh, ql, ph):
    # before the design effect of the discordance: 93.7% in two of these cells
    cell = weighted_heavy_cell(200, frac, qh, ql, ph, K, seed=5)
    assert cell["coverage"] >= 0.94 - 2 * mc_se(0.94, K), cell


@pytest.mark.parametrize("n", [150, 500])
@pytest.mark.parametrize("q", [0.02, 0.06, 0.3])
@pytest.mark.parametrize("shift", [0.0, 0.5])
def test_graded_shares_keep_coverage(n, q, shift):
    cell = share_cell(n, q, shift, 1000, seed=4)
    assert cell["coverage"] >= 0.94 - 2 * mc_se(0.94, 1000), cell
    if cell["methods"] == ["score-bound"]:
        # the regime the score bound was made for: a few changes of size up to 1
        assert cell["coverage"] >= 0.95 - 2 * mc_se(0.95, 1000), cell


@pytest.mark.parametrize("n,q,p,big,pb", SMALL_GRID)
def test_small_graded_changes_keep_coverage_with_a_narrower_bound(n, q, p, big, pb):
    # mostly small changes (+-0.01..0.05), some with a share of large ones (0.3..1) that
    # all go one way: the scaled bound keeps 95%; with the observed second moment alone
    # (no pseudo-change) the mixed cells covered 77-93%
    cell = small_share_cell(n, q, p, big, pb, K, seed=6)
    assert cell["methods"] == ["score-bound"], cell
    assert cell["coverage"] >= 0.95 - 2 * mc_se(0.95, K), cell
