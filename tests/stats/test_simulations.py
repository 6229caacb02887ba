"""Simulations: the intervals, tests, adjustment and gate rule do what they claim.

Every simulated data set is one column of a ``paired_table`` call, so thousands of data
sets cost a few matrix products. Columns of one call share their resample stream, so the
data sets are split over several calls (seeds) to average over resample streams too.
Each figure is a proportion from S independent data sets; its Monte Carlo standard error
is sqrt(p (1 - p) / S) (0.0034 for p = 0.95 or 0.05 and S = 4,000), and each bound below
allows about 3 standard errors beyond the nominal level, as stated next to it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, special
from scipy import stats as stats_

from raglab.stats import adjust_pvalues, non_inferior, paired_table

A, B_ = 2.0, 3.0          # Beta(2, 3) per-case quality: a skewed share-like metric in [0, 1]


def _beta_power_mean(t: float) -> float:
    """E[X**t] for X ~ Beta(A, B_)."""
    return float(special.beta(A + t, B_) / special.beta(A, B_))


def _share_pairs(rng, n: int, k: int, power: float, rho: float = 0.6):
    """``k`` data sets of ``n`` paired cases. Baseline X ~ Beta(2, 3); candidate ``Y**power``
    where Y is X for a share ``rho`` of cases and an independent Beta(2, 3) draw otherwise,
    so the pairs are correlated and the true mean difference is exactly
    E[X**power] - E[X]."""
    x = rng.beta(A, B_, (n, k))
    y = np.where(rng.random((n, k)) < rho, x, rng.beta(A, B_, (n, k)))
    return x, y ** power, _beta_power_mean(power) - _beta_power_mean(1.0)


def _binary_pairs(rng, n: int, k: int, p_lost: float, p_gained: float, p_base: float = 0.7):
    """Paired pass/fail: a case is lost (1 -> 0) with probability ``p_lost``, gained (0 -> 1)
    with ``p_gained``, else concordant; true difference p_gained - p_lost."""
    u = rng.random((n, k))
    cells = np.select([u < p_lost, u < p_lost + p_gained,
                       u < p_lost + p_gained + (p_base - p_lost)], [0, 1, 2], 3)
    base = np.isin(cells, (0, 2)).astype(float)       # lost or both pass
    cand = np.isin(cells, (1, 2)).astype(float)       # gained or both pass
    return base, cand, p_gained - p_lost


def _run(make, n_sets: int, batches: int, kind: str, direction: str = "higher", **kw):
    stats, truth = [], None
    for seed in range(batches):
        rng = np.random.default_rng(1000 + seed)
        base, cand, truth = make(rng, n_sets // batches)
        stats += paired_table(base, cand, [kind] * base.shape[1],
                              [direction] * base.shape[1], seed=seed, **kw)
    return stats, truth


def _coverage(stats, truth) -> float:
    return float(np.mean([s.ci_low <= truth <= s.ci_high for s in stats]))


def test_interval_coverage_share_metric():
    stats, truth = _run(lambda rng, k: _share_pairs(rng, 200, k, power=0.85), 4000, 8,
                        "share")
    check = integrate.quad(lambda x: (x ** 0.85 - x) * stats_.beta.pdf(x, A, B_), 0, 1)[0]
    assert truth == pytest.approx(check, rel=1e-8)
    cover = _coverage(stats, truth)
    print(f"share metric, n=200, 4000 data sets: 95% interval coverage {cover:.4f}")
    assert 0.93 <= cover <= 0.97


def test_interval_coverage_binary_metric():
    stats, truth = _run(lambda rng, k: _binary_pairs(rng, 150, k, 0.08, 0.13), 4000, 8,
                        "binary")
    assert truth == pytest.approx(0.05)
    assert {s.test for s in stats} == {"score"}
    cover = _coverage(stats, truth)
    print(f"binary metric, n=150, 4000 data sets: 95% interval coverage {cover:.4f}")
    assert 0.93 <= cover <= 0.97


def test_permutation_pvalues_are_uniform_under_the_null():
    stats, _ = _run(lambda rng, k: _share_pairs(rng, 80, k, power=1.0), 4000, 4, "share")
    p = np.array([s.p_value for s in stats])
    assert {s.test for s in stats} == {"permutation"}
    se = math.sqrt(0.05 * 0.95 / p.size)
    shares = {a: float((p < a).mean()) for a in (0.01, 0.05, 0.1, 0.5)}
    print(f"permutation p under the null, n=80, 4000 data sets: P(p < a) = {shares}")
    for a, share in shares.items():
        assert abs(share - a) <= 3 * math.sqrt(a * (1 - a) / p.size) + 1 / 2001, (a, share)
    assert shares[0.05] <= 0.05 + 3 * se


def test_permutation_pvalues_on_integer_metrics_under_the_null():
    # ranks: integer differences with many ties, so the permutation distribution is a
    # lattice and small p-values come from the tail computation with its continuity
    # correction
    def make(rng, k):
        base = rng.integers(1, 6, (60, k)).astype(float)
        cand = np.where(rng.random((60, k)) < 0.5, base, rng.integers(1, 6, (60, k)))
        return base, cand.astype(float), 0.0

    stats, _ = _run(make, 4000, 4, "rank", direction="lower")
    p = np.array([s.p_value for s in stats])
    shares = {a: float((p < a).mean()) for a in (0.005, 0.01, 0.05)}
    print(f"permutation p under the null, integer metric, n=60: P(p < a) = {shares}")
    for a, share in shares.items():
        assert share <= a + 3 * math.sqrt(a * (1 - a) / p.size), (a, share)
        assert share >= a / 2, (a, share)       # valid but not uselessly conservative


def test_binary_score_test_is_valid_under_the_null():
    stats, _ = _run(lambda rng, k: _binary_pairs(rng, 150, k, 0.1, 0.1), 4000, 4, "binary")
    reject = float(np.mean([s.p_value < 0.05 for s in stats]))
    print(f"binary score test under the null, n=150, 4000 data sets: P(p < 0.05) = {reject:.4f}")
    assert reject <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 4000)


@pytest.mark.slow  # a simulation of 12 correlated tests
def test_holm_keeps_the_familywise_error():
    families, m, n = 2000, 20, 100
    pvals = []
    for seed in range(8):
        rng = np.random.default_rng(2000 + seed)
        k = families * m // 8
        base, cand, _ = _share_pairs(rng, n, k, power=1.0)
        pvals += [s.p_value for s in paired_table(base, cand, ["share"] * k, ["higher"] * k,
                                                  seed=seed)]
    pvals = np.array(pvals).reshape(families, m)
    any_raw = float((pvals < 0.05).any(axis=1).mean())
    any_holm = float(np.mean([min(adjust_pvalues(list(row))) < 0.05 for row in pvals]))
    tol = 3 * math.sqrt(0.05 * 0.95 / families)
    print(f"{families} families of {m} null tests, n={n}: family-wise error "
          f"unadjusted {any_raw:.4f}, Holm {any_holm:.4f}")
    assert any_raw > 0.5                       # the family is big enough to need adjusting
    assert any_holm <= 0.05 + tol


MARGIN = 0.04


def test_non_inferiority_at_the_margin_says_go_rarely():
    # the true difference is exactly -MARGIN: GO would be a wrong decision
    power = optimize.brentq(lambda t: _beta_power_mean(t) - _beta_power_mean(1.0) + MARGIN,
                            1.0, 3.0)
    stats, truth = _run(lambda rng, k: _share_pairs(rng, 300, k, power=power), 4000, 8,
                        "share")
    assert truth == pytest.approx(-MARGIN, abs=1e-9)
    go = float(np.mean([non_inferior(s, MARGIN, "higher") for s in stats]))
    print(f"non-inferiority, true difference = -margin, n=300: GO {go:.4f}")
    assert go <= 0.05


def test_non_inferiority_without_difference_says_no_go_rarely():
    # n chosen for the margin: the interval's half-width is about 1.96 se, so with
    # se = MARGIN / 3.92 a no-difference candidate is NO-GO about 2.5% of the time
    rho, var = 0.6, A * B_ / ((A + B_) ** 2 * (A + B_ + 1))
    sd_diff = math.sqrt(2 * (1 - rho) * var)
    n = math.ceil((3.92 * sd_diff / MARGIN) ** 2)
    stats, truth = _run(lambda rng, k: _share_pairs(rng, n, k, power=1.0, rho=rho), 4000, 8,
                        "share")
    assert truth == 0.0
    no_go = float(np.mean([not non_inferior(s, MARGIN, "higher") for s in stats]))
    print(f"non-inferiority, no difference, n={n}: NO-GO {no_go:.4f}")
    assert no_go <= 0.05
