"""Coverage of prediction-powered intervals in the regime users meet (tests/stats/ppi_sim.py):
a judge biased by about +0.15 against people, a few hundred cases, 30-100 labels,
pass/fail, yes/partial/no and [0, 1] metrics, a single run and a paired difference. Goals,
each within 2 Monte Carlo standard errors: the judge-only interval covers the human-scale
truth less than 5% of the time; the prediction-powered one at least 94%, and at most 96%
where the labels hold at least 10 expected cases away from people's most common value
(with fewer, the labels take so few values that an interval's coverage moves in steps);
with an uninformative judge it is no wider than the labels alone and covers as often.
Figures: ``python -m tests.stats.ppi_sim`` (docs/labels-statistics.md)."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from tests.stats.ppi_sim import GRID, KINDS, paired, paired_coverage, single, single_coverage

REPS = 4000
pytestmark = pytest.mark.slow


@cache
def _rarer_share(kind: str, is_paired: bool) -> float:
    """The share of cases whose human value (a paired difference's, for a pair) is not
    the most common one; a continuous scale: 1."""
    rng = np.random.default_rng(0)
    y = paired(kind, 200_000, rng)[0] if is_paired else single(kind, 200_000, rng)[0]
    values, counts = np.unique(y, return_counts=True)
    return 1.0 if values.size > 5 else 1.0 - counts.max() / y.size


def _check(c, is_paired: bool) -> None:
    assert c.judge < 0.05, c
    assert c.ppi >= 0.94 - 2 * c.mc_se, c
    if c.n * _rarer_share(c.kind, is_paired) >= 10:
        assert c.ppi <= 0.96 + 2 * c.mc_se, c
    assert c.width < c.labels_width, c


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("N,n", GRID)
def test_single_run(kind, N, n):
    _check(single_coverage(kind, N, n, REPS), False)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("N,n", GRID)
def test_paired_difference(kind, N, n):
    _check(paired_coverage(kind, N, n, REPS), True)


@pytest.mark.parametrize("kind", [KINDS[0], KINDS[2], KINDS[3]])
@pytest.mark.parametrize("N,n", GRID)
def test_uninformative_judge_is_no_wider_than_the_labels(kind, N, n):
    c = single_coverage(kind, N, n, REPS, biased=False)
    assert c.width <= c.labels_width, c
    # lam is near 0: the interval is the labels' own (Wilson's, for pass/fail), and covers
    # what it covers (Wilson's at a 70% pass rate: 93.0% with 30 labels, exactly)
    assert c.ppi >= c.labels - 2 * c.mc_se, c
    assert c.ppi >= 0.92, c
