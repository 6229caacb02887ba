"""Properties of paired_table on arbitrary small inputs: finite outputs, consistent counts."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from raglab.stats import adjust_pvalues, paired_table

VALUES = st.sampled_from([0.0, 1.0, 0.5, 0.25, 1e-6, 3.0, 1500.0, math.nan])


@st.composite
def runs(draw):
    n = draw(st.integers(0, 40))
    k = draw(st.integers(1, 4))
    binary = draw(st.lists(st.booleans(), min_size=k, max_size=k))
    cells = st.sampled_from([0.0, 1.0, math.nan])
    cols_b, cols_c = [], []
    for is_binary in binary:
        strat = cells if is_binary else VALUES
        cols_b.append(draw(st.lists(strat, min_size=n, max_size=n)))
        cols_c.append(draw(st.lists(strat, min_size=n, max_size=n)))
    base = np.array(cols_b, dtype=float).T.reshape(n, k)
    cand = np.array(cols_c, dtype=float).T.reshape(n, k)
    kinds = ["binary" if b else "share" for b in binary]
    directions = draw(st.lists(st.sampled_from(["higher", "lower", "none"]),
                               min_size=k, max_size=k))
    return base, cand, kinds, directions


@settings(max_examples=150, deadline=None)
@given(runs(), st.integers(0, 3))
def test_outputs_are_finite_and_consistent(data, seed):
    base, cand, kinds, directions = data
    out = paired_table(base, cand, kinds, directions, n_resamples=300, seed=seed)
    assert len(out) == base.shape[1]
    for j, stat in enumerate(out):
        ok = np.isfinite(base[:, j]) & np.isfinite(cand[:, j])
        assert stat.n == ok.sum()
        assert stat.wins + stat.ties + stat.losses == stat.n
        if stat.n == 0:
            assert (stat.delta, stat.ci_low, stat.ci_high, stat.p_value) == (None,) * 4
            continue
        if stat.ci_method == "unbounded":       # too few cases for the test to reach 5%
            assert stat.n <= 5 and stat.ci_low is None and stat.ci_high is None
            continue
        for v in (stat.delta, stat.ci_low, stat.ci_high, stat.p_value):
            assert v is not None and math.isfinite(v)
        assert stat.delta == np.float64(np.mean(cand[ok, j] - base[ok, j])) or \
            math.isclose(stat.delta, np.mean(cand[ok, j] - base[ok, j]), rel_tol=1e-9,
                         abs_tol=1e-12)
        assert stat.ci_low <= stat.ci_high
        assert 0.0 < stat.p_value <= 1.0
        assert stat.ci_method in ("signflip", "degenerate", "score", "score-bound",
                                  "bootstrap-t")
        assert stat.ci_low <= stat.delta <= stat.ci_high or math.isclose(
            stat.ci_low, stat.ci_high, rel_tol=1e-9, abs_tol=1e-12)
    adjusted = adjust_pvalues([s.p_value for s in out])
    for raw, adj in zip((s.p_value for s in out), adjusted):
        assert (raw is None) == (adj is None)
        if raw is not None:
            assert raw <= adj <= 1.0
