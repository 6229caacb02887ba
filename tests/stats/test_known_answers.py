"""Known answers for raglab.stats: scipy.stats, exact enumeration and hand computation.

Monte Carlo tolerances. A bootstrap interval endpoint at level q estimated from B
replicates has a standard deviation of about sqrt(q (1 - q) / B) / f(x_q), where f is the
bootstrap distribution's density, about phi(1.96) / se for a near-normal mean (se: the
standard error of the mean difference): with q = 0.025 and B = 100,000 that is 0.0085 se.
BCa adds the noise of its bias correction z0 (another ~0.008 se). Two independent estimates
(ours and scipy's) then differ with a standard deviation of about 0.017 se; the tolerance
is 0.1 se, about 6 standard deviations. A Monte Carlo p-value from B = 100,000 resamples has
a standard deviation sqrt(p (1 - p) / B) <= 0.0016; two of them differ by 0.0022 at most,
and the tolerance is 0.01.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from raglab.stats import PairedStat, adjust_pvalues, non_inferior, paired_table, significantly_worse
from raglab.stats.score import paired_interval

BIG_B = 100_000


def _mean_diff(x, y, axis=-1):
    return np.mean(y - x, axis=axis)


def _one(b, c, kind="share", direction="higher", **kw) -> PairedStat:
    b = np.asarray(b, dtype=float)[:, None]
    c = np.asarray(c, dtype=float)[:, None]
    return paired_table(b, c, [kind], [direction], **kw)[0]


def _all_finite(stat: PairedStat) -> bool:
    fields = [stat.delta, stat.ci_low, stat.ci_high, stat.p_value]
    return all(v is not None and math.isfinite(v) for v in fields)


@pytest.fixture(scope="module")
def skewed():
    """Skewed paired data (lognormal gains) where BCa and percentile intervals differ."""
    rng = np.random.default_rng(12)
    n = 30
    b = rng.random(n)
    c = b + rng.lognormal(-2.0, 1.0, n) - 0.12
    return b, c


@pytest.mark.parametrize("method", ["BCa", "percentile"])
def test_interval_matches_scipy_bootstrap(skewed, method):
    b, c = skewed
    se = (c - b).std(ddof=1) / math.sqrt(len(b))
    ref = stats.bootstrap((b, c), _mean_diff, paired=True, method=method,
                          n_resamples=BIG_B, rng=1, vectorized=True).confidence_interval
    ours = _one(b, c, n_resamples=BIG_B, interval=method.lower())
    assert ours.ci_method == method.lower()
    assert abs(ours.ci_low - ref.low) < 0.1 * se
    assert abs(ours.ci_high - ref.high) < 0.1 * se
    # the default for these 30 unbounded graded differences (fewer than 50 changed): the
    # sign-flip inversion; with 50 or more, the bootstrap-t
    assert _one(b, c, n_resamples=BIG_B).ci_method == "signflip"
    assert _one(np.tile(b, 2), np.tile(c, 2)).ci_method == "bootstrap-t"


def test_bca_and_percentile_differ_on_skewed_data(skewed):
    # so the BCa comparison above could not pass with a percentile interval
    b, c = skewed
    se = (c - b).std(ddof=1) / math.sqrt(len(b))
    bca = _one(b, c, n_resamples=BIG_B, interval="bca")
    pct = _one(b, c, n_resamples=BIG_B, interval="percentile")
    assert abs(bca.ci_high - pct.ci_high) > 0.3 * se


def test_percentile_fallback_matches_scipy_small_n():
    rng = np.random.default_rng(5)
    b = rng.random(8)
    c = b + rng.normal(0.1, 0.2, 8)
    se = (c - b).std(ddof=1) / math.sqrt(8)
    ours = _one(b, c, n_resamples=BIG_B, interval="bca")
    assert ours.ci_method == "percentile"
    ref = stats.bootstrap((b, c), _mean_diff, paired=True, method="percentile",
                          n_resamples=BIG_B, rng=3, vectorized=True).confidence_interval
    assert abs(ours.ci_low - ref.low) < 0.1 * se
    assert abs(ours.ci_high - ref.high) < 0.1 * se


@pytest.mark.parametrize("confidence", [0.9, 0.99])
def test_confidence_level_matches_scipy(skewed, confidence):
    b, c = skewed
    se = (c - b).std(ddof=1) / math.sqrt(len(b))
    ref = stats.bootstrap((b, c), _mean_diff, paired=True, method="BCa",
                          confidence_level=confidence, n_resamples=BIG_B, rng=4,
                          vectorized=True).confidence_interval
    ours = _one(b, c, n_resamples=BIG_B, confidence=confidence, interval="bca")
    # the 99% endpoints sit in thinner tails: twice the tolerance
    tol = (0.1 if confidence == 0.9 else 0.2) * se
    assert abs(ours.ci_low - ref.low) < tol and abs(ours.ci_high - ref.high) < tol


def test_permutation_pvalue_matches_scipy_monte_carlo():
    rng = np.random.default_rng(8)
    n = 60
    b = rng.random(n)
    c = b + rng.normal(0.03, 0.15, n)
    ours = _one(b, c, n_resamples=BIG_B)
    ref = stats.permutation_test((b, c), _mean_diff, permutation_type="samples",
                                 n_resamples=BIG_B, rng=1, vectorized=True)
    assert ours.test == "permutation"
    assert 0.01 < ref.pvalue < 0.5          # a region where the comparison means something
    assert abs(ours.p_value - ref.pvalue) < 0.01


@pytest.mark.parametrize("n", [1, 2, 5, 9, 10])
def test_exact_permutation_matches_scipy_and_enumeration(n):
    rng = np.random.default_rng(n)
    b = rng.random(n).round(1)                    # ties and zero differences included
    c = (b + rng.normal(0.1, 0.2, n)).round(1)
    ours = _one(b, c)                             # 2**n <= 2000: exact
    assert ours.test == "permutation-exact"
    if n > 1:                                     # scipy needs two observations
        ref = stats.permutation_test((b, c), _mean_diff, permutation_type="samples",
                                     vectorized=True)  # exact as well for these n
        assert ours.p_value == pytest.approx(ref.pvalue, abs=1e-12)
    d = c - b
    obs = abs(d.sum())
    hits = sum(abs(sum(s * x for s, x in zip(signs, d))) >= obs - 1e-9
               for signs in itertools.product((1, -1), repeat=n))
    assert ours.p_value == pytest.approx(hits / 2 ** n, abs=1e-12)


def test_exact_permutation_by_hand():
    # d = [1, 2, 3, -0.5], sum 5.5: of the 16 sign vectors, |sum| >= 5.5 for
    # (+,+,+,-) = 5.5, (+,+,+,+) = 6.5 and their negations: p = 4/16
    stat = _one([0, 0, 0, 1], [1, 2, 3, 0.5])
    assert stat.p_value == 0.25 and stat.test == "permutation-exact"
    assert stat.delta == pytest.approx(1.375)


def test_binary_score_test_by_hand():
    # 1 case lost (1 -> 0), 7 gained (0 -> 1), 12 concordant: the test whose inversion is
    # the interval is, at 0, McNemar's score statistic (7 - 1) / sqrt(7 + 1)
    b = [1] * 1 + [0] * 7 + [1] * 6 + [0] * 6
    c = [0] * 1 + [1] * 7 + [1] * 6 + [0] * 6
    stat = _one(b, c, kind="binary")
    assert stat.test == "score"
    assert stat.p_value == pytest.approx(2 * stats.norm.sf(6 / np.sqrt(8)), rel=1e-12)
    assert stat.p_value == pytest.approx(0.033895, abs=1e-6)
    assert (stat.wins, stat.ties, stat.losses) == (7, 12, 1)
    assert stat.delta == pytest.approx(6 / 20)
    assert stat.p_value < 0.05 and stat.ci_low > 0      # the interval agrees


def test_binary_score_test_many_against_mcnemars_chi_square():
    # McNemar's uncorrected chi-square (b - c)^2 / (b + c), 1 df, is the square of the
    # score statistic at 0
    rng = np.random.default_rng(2)
    n, k = 40, 60
    base = (rng.random((n, k)) < 0.5).astype(float)
    flip = rng.random((n, k)) < rng.random(k) * 0.4
    cand = np.where(flip & (rng.random((n, k)) < rng.random(k)), 1 - base, base)
    out = paired_table(base, cand, ["binary"] * k, ["higher"] * k)
    for j, stat in enumerate(out):
        lost = int(((base[:, j] == 1) & (cand[:, j] == 0)).sum())
        gained = int(((base[:, j] == 0) & (cand[:, j] == 1)).sum())
        m = lost + gained
        ref = stats.chi2.sf((gained - lost) ** 2 / m, 1) if m else 1.0
        assert stat.p_value == pytest.approx(ref, rel=1e-9, abs=1e-15)
        assert (stat.p_value < 0.05) == (not stat.ci_low <= 0 <= stat.ci_high)


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04;
    # running maximum: 0.02, 0.03, 0.06, 0.06
    assert adjust_pvalues([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust_pvalues([0.01, None, 0.04, 0.03, 0.005, None]) == \
        pytest.approx([0.03, None, 0.06, 0.06, 0.02, None])
    assert adjust_pvalues([0.6, 0.9]) == [1.0, 1.0]
    assert adjust_pvalues([]) == [] and adjust_pvalues([None]) == [None]


def test_bh_by_hand_and_against_scipy():
    # sorted 0.005, 0.01, 0.03, 0.04 -> p m / i = 0.02, 0.02, 0.04, 0.04; cumulative
    # minimum from the top leaves them as they are
    assert adjust_pvalues([0.01, 0.04, 0.03, 0.005], "bh") == \
        pytest.approx([0.02, 0.04, 0.04, 0.02])
    rng = np.random.default_rng(0)
    p = list(rng.random(50) ** 3)
    ref = stats.false_discovery_control(p, method="bh")
    with_none = p[:20] + [None] + p[20:]
    got = adjust_pvalues(with_none, "bh")
    assert got[20] is None
    assert got[:20] + got[21:] == pytest.approx(list(ref), rel=1e-12)


def test_adjust_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown p-value adjustment"):
        adjust_pvalues([0.1], "bonferroni-ish")
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        adjust_pvalues([1.5])


@pytest.mark.parametrize("direction,expected", [("higher", (2, 1, 1)), ("lower", (1, 1, 2)),
                                                ("none", (2, 1, 1))])
def test_wins_ties_losses_by_direction(direction, expected):
    stat = _one([0.5, 0.5, 0.5, 0.5], [0.7, 0.9, 0.5, 0.1], direction=direction)
    assert (stat.wins, stat.ties, stat.losses) == expected


def test_float_noise_is_a_tie():
    b = np.array([0.1, 0.2, 0.7] * 3)
    c = np.array([0.3 - 0.2, 0.1 + 0.1, 0.7] * 3)     # equal up to rounding
    stat = _one(b, c)
    assert stat.ties == 9 and stat.delta == 0.0
    # a share where nothing changed: the pass/fail interval of no change (near Tango's
    # +-z^2 / (n + z^2) = 0.299, here 0.344 with the continuity correction), not [0, 0]
    assert stat.ci_method == "score-bound"
    assert stat.ci_high == pytest.approx(paired_interval(0, 0, 9)[1][0], rel=1e-9) \
        == -stat.ci_low
    assert stat.ci_high == pytest.approx(0.343908, abs=1e-6)
    assert _one(b, c, kind="latency").ci_method == "degenerate"


def test_only_rows_finite_in_both_count():
    rng = np.random.default_rng(4)
    n = 300
    b = rng.random(n)
    c = b + rng.normal(0.05, 0.2, n)
    b_nan, c_nan = b.copy(), c.copy()
    b_nan[::7] = np.nan
    c_nan[3::11] = np.nan
    c_nan[5] = np.inf
    keep = np.isfinite(b_nan) & np.isfinite(c_nan)
    got = _one(b_nan, c_nan)
    ref = _one(b[keep], c[keep])
    assert got.n == keep.sum() == ref.n
    assert got == ref
    assert got.delta == pytest.approx(np.mean(c[keep]) - np.mean(b[keep]))


def test_columns_are_independent_of_each_other():
    rng = np.random.default_rng(9)
    n = 120
    base = rng.random((n, 4))
    cand = base + rng.normal(0.02, 0.2, (n, 4))
    base[:30, 2] = np.nan                          # a column with its own n
    cand[rng.random(n) < 0.3, 3] = np.nan
    table = paired_table(base, cand, ["share"] * 4, ["higher"] * 4)
    for j in range(4):
        alone = paired_table(base[:, [j]], cand[:, [j]], ["share"], ["higher"])[0]
        for field in ("delta", "ci_low", "ci_high", "p_value"):
            assert getattr(table[j], field) == pytest.approx(getattr(alone, field), rel=1e-9)
        assert table[j].n == alone.n and table[j].ci_method == alone.ci_method


def test_deterministic_and_seeded():
    rng = np.random.default_rng(1)
    base = rng.random((200, 5))
    cand = base + rng.normal(0, 0.2, (200, 5))
    kinds, dirs = ["share"] * 5, ["higher"] * 5
    first = paired_table(base, cand, kinds, dirs, seed=3)
    assert paired_table(base, cand, kinds, dirs, seed=3) == first
    # the bootstrap-t follows the tests' fixed plan: the seed moves only bca / percentile
    assert paired_table(base, cand, kinds, dirs, seed=4) == first
    bca = paired_table(base, cand, kinds, dirs, seed=3, interval="bca")
    other = paired_table(base, cand, kinds, dirs, seed=4, interval="bca")
    assert [s.ci_low for s in other] != [s.ci_low for s in bca]


def test_no_case_in_common():
    stat = _one([np.nan, 1.0, np.nan], [0.5, np.nan, np.nan])
    assert stat == PairedStat(None, None, None, None, 0, 0, 0, 0, "none", "none")
    empty = paired_table(np.empty((0, 2)), np.empty((0, 2)), ["share", "binary"],
                         ["higher", "lower"])
    assert [s.n for s in empty] == [0, 0] and empty[1].test == "none"


@pytest.mark.parametrize("kind", ["share", "binary", "latency"])
@pytest.mark.parametrize("b,c", [
    ([0.0], [1.0]),                     # n = 1
    ([1.0], [1.0]),                     # n = 1, tie
    ([0.0] * 40, [0.0] * 40),           # all zero differences
    ([0.0] * 25, [1.0] * 25),           # all equal differences
    ([1.0, 0.0], [0.0, 1.0]),           # n = 2, opposite
])
def test_degenerate_inputs_are_finite(kind, b, c):
    stat = _one(b, c, kind=kind)
    if kind != "latency":
        # bounded kinds: Tango's score interval is finite and proper at every n
        assert _all_finite(stat), stat
        assert stat.ci_method in ("score", "score-bound")
        assert -1.0 <= stat.ci_low <= stat.delta <= stat.ci_high <= 1.0
        assert stat.ci_low < stat.ci_high
        return
    if len(b) <= 5:
        # 2 of the 2**n sign vectors are always as extreme: with n <= 5 the test cannot
        # reach 5%, so no difference is excluded and the interval is unbounded, even when
        # every difference is the same (one case's difference is no certainty)
        assert stat.ci_method == "unbounded" and stat.ci_low is None is stat.ci_high
        assert 0.0 < stat.p_value <= 1.0 and stat.delta is not None
        return
    assert _all_finite(stat), stat
    assert stat.ci_low <= stat.delta <= stat.ci_high
    assert 0.0 <= stat.p_value <= 1.0
    if len(set(np.subtract(c, b))) == 1:
        assert stat.ci_method == "degenerate" and stat.ci_low == stat.ci_high == stat.delta


def test_equal_cluster_differences_with_few_clusters_are_unbounded():
    """Three conversations of two turns, each conversation's mean up by 0.5: the sign-flip
    test over 3 units cannot reach 5% (p = 2/8), so the interval excludes nothing. It was
    [0.5, 0.5] ('degenerate'), and a non-inferiority gate passed on it; so did two identical
    runs ([0, 0]). From 6 units every shift but the observed one is rejected (p = 2/64)."""
    base = np.array([[1.0], [0.0]] * 3)
    up = np.ones((6, 1))
    convs = np.repeat(np.arange(3), 2)
    for cand, delta in ((up, 0.5), (base, 0.0)):
        stat = paired_table(base, cand, ["share"], ["higher"], clusters=convs)[0]
        assert stat.units == 3 and stat.delta == delta
        assert stat.ci_method == "unbounded" and stat.ci_low is None is stat.ci_high
    assert paired_table(base, up, ["share"], ["higher"], clusters=convs)[0].p_value == 0.25
    six = paired_table(np.tile(base, (2, 1)), np.ones((12, 1)), ["share"], ["higher"],
                       clusters=np.repeat(np.arange(6), 2))[0]
    assert six.ci_method == "degenerate" and six.ci_low == six.ci_high == 0.5
    assert six.p_value == pytest.approx(2 / 64)


def test_equal_shift_is_degenerate_at_its_value():
    b = np.linspace(0, 0.9, 50)
    stat = _one(b, b + 0.1, kind="count")    # (a share keeps its score bound)
    assert stat.ci_method == "degenerate"
    assert stat.ci_low == stat.ci_high == stat.delta == pytest.approx(0.1)
    # only the two all-same-sign vectors reach the observed sum: p = 2 / 2**50, computed
    # in the tail (Monte Carlo alone would floor it at 1/2001)
    assert stat.p_value == pytest.approx(2 / 2 ** 50, rel=1e-12)


def test_every_output_is_finite_on_awkward_data():
    rng = np.random.default_rng(12)
    n, k = 60, 40
    base = rng.integers(0, 2, (n, k)).astype(float)
    cand = base.copy()
    cand[rng.random((n, k)) < 0.05] = 1.0            # few discordant pairs
    base[rng.random((n, k)) < rng.random(k)] = np.nan  # n from ~0 to 60
    cand[:, :5] = base[:, :5]                        # identical runs
    kinds = ["binary" if j % 2 else "share" for j in range(k)]
    for stat in paired_table(base, cand, kinds, ["higher"] * k):
        if stat.ci_method == "unbounded":
            assert stat.units is not None and stat.units <= 5, stat
        elif stat.n:
            assert _all_finite(stat), stat
            assert stat.ci_low <= stat.ci_high
        else:
            assert stat.delta is None and stat.p_value is None


def test_bca_rule():
    rng = np.random.default_rng(3)
    b = rng.random(30)
    c = b + rng.normal(0.05, 0.2, 30)
    assert _one(b, c, interval="bca").ci_method == "bca"
    assert _one(b[:9], c[:9], interval="bca").ci_method == "percentile"


def test_bad_input_is_refused():
    ones = np.ones((3, 1))
    with pytest.raises(ValueError, match="one shape"):
        paired_table(ones, np.ones((4, 1)), ["share"], ["higher"])
    with pytest.raises(ValueError, match="unknown kind"):
        paired_table(ones, ones, ["ratio"], ["higher"])
    with pytest.raises(ValueError, match="unknown direction"):
        paired_table(ones, ones, ["share"], ["up"])
    with pytest.raises(ValueError, match="1 metric columns but 2 kinds"):
        paired_table(ones, ones, ["share", "share"], ["higher"])
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        paired_table(ones, ones, ["share"], ["higher"], seed=-1)
    with pytest.raises(ValueError, match="interval must be"):
        paired_table(ones, ones, ["share"], ["higher"], interval="basic")
    with pytest.raises(ValueError, match="confidence"):
        paired_table(ones, ones, ["share"], ["higher"], confidence=95)
    with pytest.raises(ValueError, match="column 0 is binary"):
        paired_table(ones * 0.5, ones, ["binary"], ["higher"])


def _stat(delta, lo, hi, p):
    return PairedStat(delta, lo, hi, p, 100, 0, 0, 0, "bca", "permutation")


def test_non_inferior_rule():
    assert non_inferior(_stat(-0.01, -0.04, 0.02, 0.3), 0.05, "higher")
    assert not non_inferior(_stat(-0.01, -0.05, 0.02, 0.3), 0.05, "higher")   # strict
    assert non_inferior(_stat(0.01, -0.02, 0.04, 0.3), 0.05, "lower")
    assert not non_inferior(_stat(0.01, -0.02, 0.06, 0.3), 0.05, "lower")
    assert not non_inferior(PairedStat(None, None, None, None, 0, 0, 0, 0, "none", "none"),
                            0.05, "higher")
    with pytest.raises(ValueError, match="direction"):
        non_inferior(_stat(0, 0, 0, 1), 0.05, "none")


def test_significantly_worse_rule():
    worse_higher = _stat(-0.03, -0.05, -0.01, 0.01)
    assert significantly_worse(worse_higher, "higher")
    assert not significantly_worse(worse_higher, "lower")        # better for a 'lower' metric
    assert not significantly_worse(worse_higher, "higher", p=0.2)  # adjusted p given
    assert not significantly_worse(worse_higher, "higher", alpha=0.01)
    assert significantly_worse(_stat(0.02, 0.01, 0.03, 0.001), "lower")
    assert not significantly_worse(PairedStat(None, None, None, None, 0, 0, 0, 0, "none",
                                              "none"), "higher")
