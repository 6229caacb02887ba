"""The score interval of a prediction-powered mean (raglab.stats.ppi_score): known answers
(Tango's interval and Wilson's where the judge is not used), the maximum-likelihood
distribution it rests on, and which estimates get it. Coverage: the slow simulations of
tests/stats/test_ppi_simulations.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import ndtri

from raglab.stats.ppi import ppi_mean, ppi_stratified
from raglab.stats.ppi_score import _restricted_variance
from raglab.stats.score import score_interval as tango

Z = 1.959963984540054


def _wilson(k: int, n: int) -> tuple[float, float]:
    p, z2 = k / n, Z * Z
    mid = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return mid - half, mid + half


@pytest.mark.parametrize("gained,lost,n", [(0, 0, 20), (0, 3, 87), (5, 1, 40), (7, 7, 30),
                                           (12, 2, 60), (1, 9, 100)])
def test_without_the_judge_a_paired_difference_gets_tangos_interval(gained, lost, n):
    d = [1.0] * gained + [-1.0] * lost + [0.0] * (n - gained - lost)
    est = ppi_mean(d, [0.0] * n, [0.0] * (n + 50), lam=0.0, bounds=(-1.0, 1.0))
    lo, hi = tango(gained, lost, n)
    assert est.interval == "score"
    assert (est.ci_low, est.ci_high) == pytest.approx((float(lo[0]), float(hi[0])), abs=1e-8)


def test_tangos_worked_example():
    # Cavo et al. 2012 (Fagerland, Lydersen and Laake, Statistical Analysis of Contingency
    # Tables, ch. 8), as tests/stats/test_score.py checks it for compare: n12 = 6,
    # n21 = 16, N = 161; Tango's 95% interval -0.1240 to -0.0054
    d = [1.0] * 6 + [-1.0] * 16 + [0.0] * 139
    est = ppi_mean(d, [0.0] * 161, [0.0] * 200, lam=0.0, bounds=(-1.0, 1.0))
    assert (round(est.ci_low, 4), round(est.ci_high, 4)) == (-0.1240, -0.0054)


@pytest.mark.parametrize("k,n", [(0, 30), (3, 30), (21, 30), (30, 30), (58, 60)])
def test_without_the_judge_a_pass_rate_gets_wilsons_interval(k, n):
    y = [1.0] * k + [0.0] * (n - k)
    est = ppi_mean(y, [1.0] * n, [1.0] * (n + 100), bounds=(0.0, 1.0))
    assert est.lam == 0.0 and est.interval == "score"
    assert (est.ci_low, est.ci_high) == pytest.approx(_wilson(k, n), abs=1e-8)


def test_the_restricted_distribution_is_the_maximum_likelihood_one():
    # values 0 (20 times), 1 (5), -0.4 (5); at mu = 0.3 (above the mean 0.1, and within
    # what the labels reach) the empirical likelihood's tilt; checked against a direct
    # maximisation over the probabilities
    from scipy.optimize import minimize

    vals, counts = np.array([-0.4, 0.0, 1.0]), np.array([5.0, 20.0, 5.0])
    mu = 0.3
    got = _restricted_variance(vals, counts, mu, (-0.9, 0.1))
    cons = [{"type": "eq", "fun": lambda p: p.sum() - 1},
            {"type": "eq", "fun": lambda p: (p * vals).sum() - mu}]
    res = minimize(lambda p: -(counts * np.log(p)).sum(), counts / counts.sum(),
                   constraints=cons, bounds=[(1e-9, 1)] * 3, method="SLSQP",
                   options={"ftol": 1e-14, "maxiter": 500})
    p = res.x
    assert got == pytest.approx(float((p * (vals - mu) ** 2).sum()), rel=1e-5)
    # beyond what the labels reach (mu above the largest value) the mass goes to the
    # extension point: p_j = n_j (mu - e) / (n (r_j - e)), the rest at e
    e = 1.5
    p = counts * (1.2 - e) / (30 * (vals - e))
    w = 1 - p.sum()
    want = float((p * (vals - 1.2) ** 2).sum()) + w * (e - 1.2) ** 2
    assert _restricted_variance(vals, counts, 1.2, (-0.9, e)) == pytest.approx(want)
    # and nowhere to put it: no distribution has that mean
    assert _restricted_variance(vals, counts, 1.2, (-0.9, 0.1)) is None


def test_which_estimates_get_the_score_interval():
    rng = np.random.default_rng(3)
    y = (rng.random(40) < 0.7).astype(float)
    f = np.where(rng.random(40) < 0.8, y, 1 - y)
    u = (rng.random(160) < 0.8).astype(float)
    allf = np.concatenate([f, u])
    assert ppi_mean(y, f, allf, bounds=(0.0, 1.0)).interval == "score"
    # yes / partial / no labels and a judge's share of supported claims: a scale too
    partial = np.where(rng.random(40) < 0.2, 0.5, y)
    share = np.clip(f * 0.9 + rng.random(40) * 0.1, 0, 1)
    assert ppi_mean(partial, share, np.concatenate([share, u]),
                    bounds=(0.0, 1.0)).interval == "score"
    # human values on a continuous scale, no bounds, or a stratified sample: Hall's
    cont = rng.beta(3, 2, 40)
    assert ppi_mean(cont, f, allf, bounds=(0.0, 1.0)).interval == "hall"
    assert ppi_mean(y, f, allf).interval == "hall"
    strat = ppi_stratified({"a": (y[:20], f[:20], np.concatenate([f[:20], u[:80]])),
                            "b": (y[20:], f[20:], np.concatenate([f[20:], u[80:]]))},
                           {"a": 100, "b": 100}, bounds=(0.0, 1.0))
    assert strat.interval == "hall"
    with pytest.raises(ValueError, match="score interval needs bounds"):
        ppi_mean(y, f, allf, interval="score")
    with pytest.raises(ValueError, match="simple random sample"):
        ppi_stratified({"a": (y, f, allf)}, {"a": 200}, bounds=(0.0, 1.0), interval="score")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([-1.0, 0.0, 1.0]), min_size=10, max_size=60),
       st.lists(st.sampled_from([-1.0, 0.0, 1.0]), min_size=10, max_size=60),
       st.lists(st.sampled_from([-1.0, 0.0, 1.0]), min_size=0, max_size=80))
def test_the_interval_holds_the_estimate_and_stays_in_range(human, judge, rest):
    n = min(len(human), len(judge))
    y, f = np.array(human[:n]), np.array(judge[:n])
    est = ppi_mean(y, f, np.concatenate([f, rest]), bounds=(-1.0, 1.0))
    assert est.interval == "score"
    assert -1.0 <= est.ci_low <= est.estimate <= est.ci_high <= 1.0
    assert est.ci_high > est.ci_low


def test_an_estimate_outside_the_range_gets_an_interval_not_a_point():
    # classic PPI (lam 1): 60 labels all yes, the judge said no on 6 of them and yes on the
    # 240 others: the estimate 1 + 6 / 60 = 1.1 is above the range, and tested as it stands
    # it rejected every theta in [0, 1] (the interval was [1, 1]). It is reported as 1 and
    # tested as 1: the lower end is where the score statistic of 1 reaches z
    y, f = [1.0] * 60, [1.0] * 54 + [0.0] * 6
    judge_all = f + [1.0] * 240
    est = ppi_mean(y, f, judge_all, lam=1.0, bounds=(0.0, 1.0))
    assert est.interval == "score" and est.estimate == 1.0 and est.ci_high == 1.0
    r = np.array(y) - np.array(f)
    vals, counts = np.unique(r, return_counts=True)
    jm = sum(judge_all) / len(judge_all)
    v = _restricted_variance(vals, counts.astype(float), est.ci_low - 1.0, (-jm, 1.0 - jm))
    assert (1.0 - est.ci_low) / math.sqrt(v / 60) == pytest.approx(Z, abs=1e-7)
    assert est.ci_low == pytest.approx(0.8923, abs=1e-4)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=10, max_size=40),
       st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=10, max_size=40),
       st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=0, max_size=80),
       st.sampled_from([0.0, 0.3, 0.8, 1.0]))
def test_any_fixed_lam_gives_an_interval_holding_the_estimate(human, judge, rest, lam):
    n = min(len(human), len(judge))
    y, f = np.array(human[:n]), np.array(judge[:n])
    est = ppi_mean(y, f, np.concatenate([f, rest]), lam=lam, bounds=(0.0, 1.0))
    assert est.interval == "score"
    assert 0.0 <= est.ci_low <= est.estimate <= est.ci_high <= 1.0
    assert est.ci_high > est.ci_low


@settings(max_examples=100, deadline=None)
@given(st.integers(10, 300), st.floats(0.0, 1.0), st.floats(0.0, 1.0),
       st.sampled_from([0.01, 0.05, 0.1, 0.2]), st.integers(0, 40))
def test_without_the_judge_any_counts_and_level_give_tangos_and_wilsons(n, g_share, l_share,
                                                                        alpha, m):
    g = round(g_share * n)
    lost = round(l_share * (n - g))
    d = [1.0] * g + [-1.0] * lost + [0.0] * (n - g - lost)
    judge = [0.5] * n           # any judge: lam 0 ignores it
    est = ppi_mean(d, judge, judge + [0.0] * m, lam=0.0, alpha=alpha, bounds=(-1.0, 1.0))
    lo, hi = tango(g, lost, n, confidence=1 - alpha)
    assert (est.ci_low, est.ci_high) == pytest.approx((float(lo[0]), float(hi[0])), abs=1e-8)
    y = [1.0] * g + [0.0] * (n - g)
    est = ppi_mean(y, judge, judge + [0.0] * m, lam=0.0, alpha=alpha, bounds=(0.0, 1.0))
    z = float(ndtri(1 - alpha / 2))
    p, z2 = g / n, z * z
    mid = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    assert (est.ci_low, est.ci_high) == pytest.approx((mid - half, mid + half), abs=1e-8)
