"""p-values and intervals are functions of the multiset of paired units: the order of the
cases and ``seed`` move none of them (only the ``bca`` / ``percentile`` intervals follow
the seed)."""

from __future__ import annotations

import numpy as np
import pytest

from raglab.stats import one_sided, paired_table

FIELDS = ("delta", "ci_low", "ci_high", "p_value", "ci_method", "test", "mde", "n_eff")


def _sparse(n: int = 60):
    """12 gains and 4 losses of a graded share, the rest ties: the audit's example."""
    base = np.full((n, 1), 0.5)
    cand = base.copy()
    cand[:12, 0] = 1.0
    cand[12:16, 0] = 0.0
    return base, cand


def _dense(n: int = 120, seed: int = 0):
    """Graded differences in most cases (the bootstrap-t regime), two columns."""
    rng = np.random.default_rng(seed)
    base = rng.random((n, 2))
    cand = np.clip(base + rng.normal(0.03, 0.2, (n, 2)), 0.0, 1.0)
    return base, cand


def _fields(stats):
    return [tuple(getattr(s, f) for f in FIELDS) for s in stats]


@pytest.mark.parametrize("interval", ["auto", "signflip"])
def test_the_signflip_pvalue_of_12_gains_and_4_losses_is_order_free(interval):
    base, cand = _sparse()
    kw = {"interval": interval}
    first = paired_table(base, cand, ["latency"], ["higher"], **kw)
    one = one_sided(base, cand, [0.05], ["less"], kinds=["latency"], **kw)
    rng = np.random.default_rng(7)
    for _ in range(12):
        order = rng.permutation(base.shape[0])
        again = paired_table(base[order], cand[order], ["latency"], ["higher"], **kw)
        assert _fields(again) == _fields(first)      # bit-identical, not approximately
        assert one_sided(base[order], cand[order], [0.05], ["less"], kinds=["latency"],
                         **kw) == one
    # the test is Monte Carlo here (2**60 sign vectors): 2 x P(Bin(16, 1/2) >= 12) = 0.077
    assert first[0].test == "permutation"
    assert first[0].p_value == pytest.approx(0.0768, abs=0.015)


@pytest.mark.parametrize("design", ["plain", "weights", "clusters"])
def test_bootstrap_t_and_signflip_results_are_order_free(design):
    base, cand = _dense()
    n = base.shape[0]
    rng = np.random.default_rng(3)
    kw: dict = {}
    if design == "weights":
        kw["weights"] = rng.choice([1.0, 4.0], n)
    if design == "clusters":
        kw["clusters"] = rng.integers(0, 30, n)
    kinds, dirs = ["count", "latency"], ["higher", "lower"]   # (a share keeps its bound)
    first = paired_table(base, cand, kinds, dirs, **kw)
    if design != "clusters":
        assert {s.ci_method for s in first} == {"bootstrap-t"}
    one = one_sided(base, cand, [-0.02, 0.02], ["greater", "less"], kinds=kinds, **kw)
    for _ in range(5):
        order = rng.permutation(n)
        moved = {k: v[order] for k, v in kw.items()}
        again = paired_table(base[order], cand[order], kinds, dirs, **moved)
        assert _fields(again) == _fields(first)
        assert one_sided(base[order], cand[order], [-0.02, 0.02], ["greater", "less"],
                         kinds=kinds, **moved) == one


def test_bootstrap_t_interval_and_one_sided_test_do_not_follow_the_seed():
    base, cand = _dense()
    kinds, dirs = ["count", "latency"], ["higher", "higher"]
    first = paired_table(base, cand, kinds, dirs, seed=0)
    assert {s.ci_method for s in first} == {"bootstrap-t"}
    one = one_sided(base, cand, [0.0, 0.05], ["greater", "less"], kinds=kinds, seed=0)
    for seed in (1, 12345):
        assert _fields(paired_table(base, cand, kinds, dirs, seed=seed)) == _fields(first)
        assert one_sided(base, cand, [0.0, 0.05], ["greater", "less"], kinds=kinds,
                         seed=seed) == one


def test_the_one_sided_bootstrap_t_test_inverts_the_interval():
    # one procedure: the one-sided p at an end of the 95% interval is about 2.5%
    base, cand = _dense()
    base, cand = base[:, :1], cand[:, :1]
    stat = paired_table(base, cand, ["count"], ["higher"])[0]
    assert stat.ci_method == "bootstrap-t"
    eps = 1e-9
    for theta, side, rejects in ((stat.ci_low - eps, "greater", True),
                                 (stat.ci_low + eps, "greater", False),
                                 (stat.ci_high + eps, "less", True),
                                 (stat.ci_high - eps, "less", False)):
        p = one_sided(base, cand, [theta], [side], kinds=["count"])[0]
        assert (p <= 0.025) == rejects, (theta, side, p)


def test_bca_intervals_still_follow_the_seed():
    base, cand = (x[:, :1] for x in _dense())
    a = paired_table(base, cand, ["share"], ["higher"], interval="bca", seed=0)[0]
    b = paired_table(base, cand, ["share"], ["higher"], interval="bca", seed=1)[0]
    assert a.p_value == b.p_value and a.ci_low != b.ci_low
