"""Prediction-powered estimates (raglab.stats.ppi): known answers, the reference
implementation ``ppi_py`` as an oracle (the test-only extra ``oracle``), stratification and
refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from raglab.stats.ppi import MIN_LABELS, PPIEstimate, TooFewLabels, ppi_mean, ppi_stratified

Z975 = 1.959963984540054


def _data(seed: int, n: int, m: int, kind: str):
    """Labelled human and judge values, and the judge on ``m`` unlabelled cases."""
    rng = np.random.default_rng(seed)
    if kind == "binary":
        y = rng.binomial(1, 0.7, n).astype(float)
        f = np.where(y == 1, rng.binomial(1, 0.95, n), rng.binomial(1, 0.6, n)).astype(float)
        u = rng.binomial(1, 0.85, m).astype(float)
    else:
        y = rng.beta(3, 2, n)
        f = np.clip(y + 0.15 + rng.normal(0, 0.1, n), 0, 1)
        u = np.clip(rng.beta(3, 2, m) + 0.15 + rng.normal(0, 0.1, m), 0, 1)
    return y, f, u


# ---- the oracle: ppi_py computes the same numbers on the same data -----------------------
CASES = [(seed, n, m, kind) for seed, (n, m) in enumerate([(30, 170), (60, 240), (100, 400),
                                                          (45, 12), (80, 80)])
         for kind in ("binary", "share")]


@pytest.mark.parametrize("seed,n,m,kind", CASES)
@pytest.mark.parametrize("lam", [None, 1.0, 0.0, 0.37])
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_matches_ppi_py(seed, n, m, kind, lam, alpha):
    ppi_py = pytest.importorskip("ppi_py")
    y, f, u = _data(seed, n, m, kind)
    # raglab's judge_all holds every case the judge scored, the labelled ones included
    # (in any order); ppi_py's unlabelled data are the cases nobody labelled
    everything = np.random.default_rng(seed).permutation(np.concatenate([f, u]))
    got = ppi_mean(y, f, everything, alpha=alpha, lam=lam, interval="clt")
    lo, hi = ppi_py.ppi_mean_ci(y, f, u, alpha=alpha, lam=lam)
    point = ppi_py.ppi_mean_pointestimate(y, f, u, lam=lam)
    assert got.estimate == pytest.approx(float(np.ravel(point)[0]), abs=1e-9)
    assert got.ci_low == pytest.approx(float(np.ravel(lo)[0]), abs=1e-9)
    assert got.ci_high == pytest.approx(float(np.ravel(hi)[0]), abs=1e-9)


@pytest.mark.parametrize("seed,n,m,kind", CASES[:4])
def test_labels_only_se_is_ppi_py_classical_interval(seed, n, m, kind):
    ppi_py = pytest.importorskip("ppi_py")
    y, f, u = _data(seed, n, m, kind)
    got = ppi_mean(y, f, np.concatenate([f, u]), interval="clt")
    lo, hi = ppi_py.classical_mean_ci(y, alpha=0.05)
    assert got.labelled_only_se * Z975 == pytest.approx((hi - lo) / 2, abs=1e-9)


@pytest.mark.parametrize("seed,n,m,kind", CASES[:4])
def test_power_tuning_is_ppi_py_lambda(seed, n, m, kind):
    """The lambda ppi_py uses (``_calc_lam_glm``, clipped to [0, 1]) is the one reported."""
    ppi_py = pytest.importorskip("ppi_py")
    from ppi_py.ppi import _calc_lam_glm

    y, f, u = _data(seed, n, m, kind)
    theta = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, u, lam=1))[0])
    want = _calc_lam_glm(y - theta, f - theta, u - theta, np.eye(1), clip=True)
    assert ppi_mean(y, f, np.concatenate([f, u])).lam == pytest.approx(want, abs=1e-12)


# ---- known answers by hand -----------------------------------------------------------------
def test_classic_ppi_by_hand():
    y = np.array([1, 0, 1, 1, 0, 1, 1, 0, 1, 1], float)
    f = np.array([1, 1, 1, 1, 0, 1, 1, 1, 1, 1], float)
    u = np.array([1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1], float)
    e = ppi_mean(y, f, np.concatenate([f, u]), lam=1.0, interval="clt")
    # mean_U f = 17/20, rectifier y - f: two -1s in ten: mean -0.2, variance 0.16
    assert e.estimate == pytest.approx(0.85 - 0.2)
    se = math.sqrt(0.85 * 0.15 / 20 + 0.16 / 10)
    assert e.se == pytest.approx(se)
    assert (e.ci_low, e.ci_high) == pytest.approx((0.65 - Z975 * se, 0.65 + Z975 * se))
    assert e.judge_mean == pytest.approx(26 / 30)
    assert (e.n_labelled, e.n_all, e.lam) == (10, 30, 1.0)
    assert e.labelled_only_se == pytest.approx(math.sqrt(0.7 * 0.3 / 10))
    assert e.n_effective == pytest.approx(10 * (0.7 * 0.3 / 10) / se ** 2)


def test_lambda_zero_is_the_labels_alone():
    y, f, u = _data(3, 40, 200, "share")
    e = ppi_mean(y, f, np.concatenate([f, u]), lam=0.0, interval="clt")
    assert e.estimate == pytest.approx(y.mean())
    assert e.se == pytest.approx(y.std() / math.sqrt(40)) == e.labelled_only_se
    assert e.n_effective == pytest.approx(40)


def test_every_case_labelled_is_the_labels_mean():
    y, f, _ = _data(4, 30, 0, "binary")
    e = ppi_mean(y, f, f[::-1], interval="clt")
    assert (e.estimate, e.lam, e.n_all) == (pytest.approx(y.mean()), 0.0, 30)
    assert e.se == pytest.approx(y.std() / math.sqrt(30))


def test_constant_judge_carries_no_information():
    y, _, _ = _data(5, 30, 0, "binary")
    e = ppi_mean(y, np.ones(30), np.ones(300))
    assert e.lam == 0.0 and e.estimate == pytest.approx(y.mean())


def test_a_perfect_judge_gains_up_to_every_case():
    rng = np.random.default_rng(6)
    y_all = rng.beta(2, 2, 400)
    e = ppi_mean(y_all[:50], y_all[:50], y_all)
    assert e.lam == pytest.approx(1 / (1 + 50 / 350), rel=0.05)
    assert 300 < e.n_effective <= 400


def test_an_opposed_judge_is_ignored_not_used_backwards():
    rng = np.random.default_rng(7)
    y = rng.beta(2, 2, 60)
    e = ppi_mean(y, 1 - y, np.concatenate([1 - y, rng.beta(2, 2, 200)]))
    assert e.lam == 0.0 and e.estimate == pytest.approx(y.mean())


def test_judge_all_must_hold_the_labelled_cases():
    y, f, u = _data(8, 30, 100, "share")
    with pytest.raises(ValueError, match="judge_all must hold"):
        ppi_mean(y, f, u)


@pytest.mark.parametrize("n", [0, 1, MIN_LABELS - 1])
def test_too_few_labels_refused(n):
    y, f, u = _data(9, max(n, 1), 100, "binary")
    with pytest.raises(TooFewLabels, match=f"{n} label.*at least {MIN_LABELS}"):
        ppi_mean(y[:n], f[:n], np.concatenate([f, u]))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_values_refused(bad):
    y, f, u = _data(10, 30, 100, "share")
    y[3] = bad
    with pytest.raises(ValueError, match="finite"):
        ppi_mean(y, f, np.concatenate([f, u]))


def test_alpha_and_lengths_checked():
    y, f, u = _data(11, 30, 100, "share")
    with pytest.raises(ValueError, match="alpha"):
        ppi_mean(y, f, np.concatenate([f, u]), alpha=1.5)
    with pytest.raises(ValueError, match="same cases"):
        ppi_mean(y, f[:-1], np.concatenate([f, u]))


# ---- stratified ------------------------------------------------------------------------------
def _strata():
    out, pop = {}, {}
    for h, (n, m, seed) in {"billing": (30, 70, 12), "hr": (40, 260, 13)}.items():
        y, f, u = _data(seed, n, m, "share")
        out[h] = (y, f, np.concatenate([f, u]))
        pop[h] = n + m
    return out, pop


def test_stratified_combines_strata_by_population_share():
    strata, pop = _strata()
    got = ppi_stratified(strata, pop, interval="clt")
    parts = {h: ppi_mean(*strata[h], interval="clt") for h in strata}
    w = {h: pop[h] / sum(pop.values()) for h in pop}
    assert got.estimate == pytest.approx(sum(w[h] * parts[h].estimate for h in w))
    se = math.sqrt(sum((w[h] * parts[h].se) ** 2 for h in w))
    assert got.se == pytest.approx(se)
    assert (got.ci_low, got.ci_high) == pytest.approx((got.estimate - Z975 * se,
                                                      got.estimate + Z975 * se))
    assert got.lam == pytest.approx(sum(w[h] * parts[h].lam for h in w))
    assert got.labelled_only_se == pytest.approx(
        math.sqrt(sum((w[h] * parts[h].labelled_only_se) ** 2 for h in w)))
    assert (got.n_labelled, got.n_all) == (70, 400)
    all_judge = np.concatenate([strata[h][2] for h in strata])
    assert got.judge_mean == pytest.approx(all_judge.mean())


def test_one_stratum_is_the_plain_estimate():
    strata, pop = _strata()
    one = ppi_stratified({"hr": strata["hr"]}, {"hr": pop["hr"]})
    assert one == ppi_mean(*strata["hr"])


def test_stratum_with_too_few_labels_refused_by_name():
    strata, pop = _strata()
    y, f, a = strata["billing"]
    strata["billing"] = (y[:4], f[:4], a)
    with pytest.raises(TooFewLabels, match="stratum 'billing': 4 labels.*at least 10"):
        ppi_stratified(strata, pop)


def test_strata_and_population_must_agree():
    strata, pop = _strata()
    with pytest.raises(ValueError, match="same strata"):
        ppi_stratified(strata, {"hr": 300})
    with pytest.raises(ValueError, match="positive"):
        ppi_stratified(strata, {**pop, "hr": 0})


def test_result_is_the_interface_dataclass():
    strata, _ = _strata()
    e = ppi_mean(*strata["hr"])
    assert isinstance(e, PPIEstimate)
    assert e.ci_low < e.estimate < e.ci_high and e.se > 0


# ---- the default interval: Student t with Hall's skewness correction ------------------------
def _hall_g(t, skew):
    a, b = skew / 3, skew / 6
    return t + a * t * t + a * a * t ** 3 / 3 + b


@pytest.mark.parametrize("seed,n,m,kind", CASES[:6])
def test_hall_interval_inverts_the_transformed_statistic(seed, n, m, kind):
    from scipy.stats import t as student_t

    y, f, u = _data(seed, n, m, kind)
    e = ppi_mean(y, f, np.concatenate([f, u]))
    clt = ppi_mean(y, f, np.concatenate([f, u]), interval="clt")
    assert (e.estimate, e.lam) == (clt.estimate, clt.lam)      # same estimator
    r = y - e.lam * f
    var = e.lam ** 2 * u.var(ddof=1) / m + r.var(ddof=1) / n
    assert e.se == pytest.approx(math.sqrt(var))
    k3 = (e.lam ** 3 * ((u - u.mean()) ** 3).mean() / m ** 2
          + ((r - r.mean()) ** 3).mean() / n ** 2)
    skew = k3 / e.se ** 3
    q = student_t.ppf(0.975, n - 1)
    # the ends are where g((estimate - theta) / se) reaches +-q
    assert _hall_g((e.estimate - e.ci_low) / e.se, skew) == pytest.approx(q)
    assert _hall_g((e.estimate - e.ci_high) / e.se, skew) == pytest.approx(-q)


def test_hall_interval_leans_towards_the_long_tail():
    rng = np.random.default_rng(21)
    y = rng.exponential(0.1, 40).clip(0, 1)          # right-skewed labels, no judge
    e = ppi_mean(y, np.zeros(40), np.zeros(200))
    assert e.lam == 0.0
    assert e.ci_high - e.estimate > e.estimate - e.ci_low


def test_symmetric_data_give_the_t_interval():
    from scipy.stats import t as student_t

    y = np.array([0.2, 0.4, 0.6, 0.8] * 5)
    e = ppi_mean(y, np.zeros(20), np.zeros(60))
    half = student_t.ppf(0.975, 19) * y.std(ddof=1) / math.sqrt(20)
    assert (e.ci_low, e.ci_high) == pytest.approx((0.5 - half, 0.5 + half))


def test_unknown_interval_refused():
    y, f, u = _data(22, 30, 100, "share")
    with pytest.raises(ValueError, match="interval must be one of"):
        ppi_mean(y, f, np.concatenate([f, u]), interval="wald")


# ---- planning --------------------------------------------------------------------------------
from raglab.stats.ppi_plan import labels_needed, plan_from_moments, planned_se  # noqa: E402


def test_plan_with_an_uninformative_judge_is_the_labels_alone():
    from scipy.stats import t as student_t

    plan = plan_from_moments(0.21, 0.1275, 0.0, 500, 0.1)
    want = next(n for n in range(MIN_LABELS, 501)
                if 2 * student_t.ppf(0.975, n - 1) * math.sqrt(0.21 / n) <= 0.1)
    assert plan.labels_needed == want == 326    # (2 t / w)^2 var = 325.1
    assert plan.lam == 0.0 and plan.n_effective == pytest.approx(want)


def test_plan_by_hand():
    # var 0.25 each, cov 0.2 (rho 0.8), N 400, n 100: lam = 0.2 / (1 + 100/300) / 0.25 = 0.6
    se, lam = planned_se(0.25, 0.25, 0.2, 100, 400)
    assert lam == pytest.approx(0.6)
    assert se ** 2 == pytest.approx(0.36 * 0.25 / 300 + (0.25 - 0.24 + 0.09) / 100)
    # the optimum: var / n (1 - rho^2 M / N)
    assert se ** 2 == pytest.approx(0.25 / 100 * (1 - 0.64 * 300 / 400))


def test_a_better_judge_needs_fewer_labels():
    weak = plan_from_moments(0.2, 0.2, 0.05, 400, 0.12)
    strong = plan_from_moments(0.2, 0.2, 0.18, 400, 0.12)
    assert strong.labels_needed < weak.labels_needed
    assert strong.n_effective > strong.labels_needed


def test_unreachable_width_says_so():
    plan = plan_from_moments(0.25, 0.25, 0.0, 200, 0.01)
    assert plan.labels_needed is None and plan.more is None
    assert plan.planned_width > 0.01   # the width with every case labelled


def test_labels_needed_from_a_first_batch():
    y, f, u = _data(30, 40, 360, "share")
    plan = labels_needed(y, f, np.concatenate([f, u]), width=0.06)
    assert plan.n_labelled == 40 and plan.n_all == 400
    assert plan.labels_needed is not None and plan.more == plan.labels_needed - 40
    assert plan.var_human == pytest.approx(y.var(ddof=1))
    now = ppi_mean(y, f, np.concatenate([f, u]))
    assert plan.width_now == pytest.approx(now.ci_high - now.ci_low, rel=0.15)
    with pytest.raises(TooFewLabels):
        labels_needed(y[:5], f[:5], np.concatenate([f, u]), width=0.06)
    with pytest.raises(ValueError, match="width"):
        labels_needed(y, f, np.concatenate([f, u]), width=0.0)


def test_planned_labels_reach_the_width():
    """Label as many cases as the plan (from the true moments) says: the intervals are
    about the target width."""
    rng = np.random.default_rng(31)
    N, target = 400, 0.05

    def run():   # a [0, 1] metric and a judge biased by +0.15 (see test_ppi_simulations)
        y = rng.beta(3, 2, N)
        s = rng.uniform(0, 0.75, N)
        return y, (1 - s) * y + s

    big = np.random.default_rng(32)
    y = big.beta(3, 2, 200_000)
    s = big.uniform(0, 0.75, y.size)
    f = (1 - s) * y + s
    plan = plan_from_moments(y.var(), f.var(), float(np.cov(y, f)[0, 1]), N, target)
    assert plan.labels_needed is not None and 30 < plan.labels_needed < N
    widths = []
    for _ in range(200):
        y, f = run()
        idx = rng.choice(N, plan.labels_needed, replace=False)
        e = ppi_mean(y[idx], f[idx], f)
        widths.append(e.ci_high - e.ci_low)
    assert np.mean(widths) == pytest.approx(target, rel=0.05)
