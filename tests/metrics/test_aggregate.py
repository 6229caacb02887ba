"""Aggregation: means over the cases where a metric applies, and numpy's percentiles."""

import numpy as np
from hypothesis import given, settings, strategies as st

from raglab.metrics.aggregate import aggregate, percentile

values = st.lists(st.one_of(st.floats(0, 1e6, allow_nan=False),
                            st.integers(0, 100).map(float)), min_size=1, max_size=80)


@settings(max_examples=300, deadline=None)
@given(vals=values, p=st.sampled_from([0, 5, 50, 95, 99, 100]))
def test_percentile_is_numpys_linear_percentile_to_the_last_bit(vals, p):
    assert percentile(vals, p) == float(np.percentile(vals, p))


def test_means_skip_cases_where_a_metric_does_not_apply():
    recs = [{"tags": {"t": "a"}, "gold": {"answerable": True},
             "metrics": {"m": 1.0, "x": None, "latency_ms.total": 10.0}},
            {"tags": {"t": "a"}, "gold": {"answerable": False},
             "metrics": {"m": 0.0, "x": None, "latency_ms.total": 30.0}},
            {"tags": {"t": "b"}, "gold": {"answerable": True},
             "metrics": {"m": None, "x": None, "latency_ms.total": 20.0}}]
    agg = aggregate(recs, ["m", "x"])
    assert agg["overall"]["m"] == 0.5 and agg["overall"]["x"] is None
    assert agg["overall"]["latency_ms.total.p50"] == 20.0
    assert agg["overall"]["latency_ms.total.p95"] == 29.0
    assert agg["slices"]["t"]["b"] == {"n": 1, "m": None, "x": None, "latency_ms.total": 20.0}
    assert agg["slices"]["answerable"]["no"]["m"] == 0.0
