"""Aggregation: means over the cases where a metric applies, and numpy's percentiles."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from raglab.metrics.aggregate import Aggregation, percentile


def aggregate(records, names):
    """All the records in one chunk, as a run with a single chunk aggregates them."""
    agg = Aggregation(names)
    agg.add(records)
    return agg.result()

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


def _reference_means(records, names):
    """The running-sum means Aggregation computed before it read the records as columns."""
    import math
    from collections import defaultdict

    sums, counts = defaultdict(float), defaultdict(int)
    for r in records:
        for name, v in (r.get("metrics") or {}).items():
            if v is not None:
                sums[name] += v
                counts[name] += 1
    out = {}
    for name in dict.fromkeys([*names, *sorted(sums)]):
        n = counts.get(name)
        if not n:
            out[name] = None
        elif math.isfinite(sums[name]):
            out[name] = sums[name] / n
        else:
            out[name] = sum(r["metrics"][name] / n for r in records
                            if (r.get("metrics") or {}).get(name) is not None)
    return out


metric_value = st.one_of(st.none(), st.floats(-1e308, 1e308, allow_nan=False),
                         st.sampled_from([0.0, -0.0, 1.0, 0.5]), st.booleans())
record = st.fixed_dictionaries({
    "tags": st.dictionaries(st.sampled_from(["t", "u"]), st.sampled_from(["a", "b", "c"])),
    "gold": st.fixed_dictionaries({"answerable": st.booleans()}),
    "metrics": st.dictionaries(st.sampled_from(["m", "n", "z", "latency_ms.total",
                                                "latency_ms.retrieve"]), metric_value)})


@settings(max_examples=300, deadline=None)
@given(recs=st.lists(record, max_size=30),
       names=st.lists(st.sampled_from(["m", "n", "x"]), max_size=4))
def test_column_means_equal_running_sums_to_the_last_bit(recs, names):
    import math

    agg = aggregate(recs, names)
    want = _reference_means(recs, names)
    overall = {k: v for k, v in agg["overall"].items() if not k.endswith((".p50", ".p95"))}
    assert list(overall) == list(want)
    for k in want:  # equal values and the same sign of zero
        assert (overall[k] is None) == (want[k] is None)
        if want[k] is not None:
            assert overall[k] == want[k] and math.copysign(1, overall[k]) == \
                math.copysign(1, want[k])
    for key, groups in agg["slices"].items():
        for value, got in groups.items():
            members = [r for r in recs if
                       (r["tags"].get(key) if key != "answerable"
                        else ("yes" if r["gold"]["answerable"] else "no")) == value]
            assert got == {"n": len(members), **_reference_means(members, names)}


@settings(max_examples=300, deadline=None)
@given(recs=st.lists(record, max_size=30),
       names=st.lists(st.sampled_from(["m", "n", "x"]), max_size=4), data=st.data())
def test_records_aggregated_in_chunks_give_the_whole_s_result_to_the_last_bit(recs, names,
                                                                               data):
    """Records added in chunks: the running sums go on across the chunks, so every mean
    (and its key order) is that of all at once."""
    import json

    cuts = sorted(data.draw(st.lists(st.integers(0, len(recs)), max_size=3)))
    agg = Aggregation(names)
    for a, b in zip([0, *cuts], [*cuts, len(recs)]):
        agg.add(recs[a:b])
    assert json.dumps(agg.result()) == json.dumps(aggregate(recs, names))


def test_a_mean_is_the_running_sum_over_the_records_on_any_python():
    """1e16 + 1.0 - 1e16 is 0.0 added one value after another; sum() of Python 3.12 and
    later compensates rounding and gives 1.0 (a third, as a mean)."""
    records = [{"gold": {"answerable": True}, "metrics": {"m": v}} for v in (1e16, 1.0, -1e16)]
    assert aggregate(records, ["m"])["overall"]["m"] == 0.0
    agg = Aggregation(["m"])
    for r in records:  # one record per chunk: the same running sum
        agg.add([r])
    assert agg.means(())["m"] == 0.0


def test_slices_list_the_numbers_in_their_values_in_order():
    """metrics.json (and so the run report) lists a conversation's turns 1, 2, 10 and
    intents i9 before i10; they were in text order (1, 10, 2)."""
    recs = [{"tags": {"turn": t, "intent": f"i{t}"}, "gold": {"answerable": True},
             "metrics": {"m": 1.0}} for t in ("10", "2", "1", "9", "01")]
    slices = aggregate(recs, ["m"])["slices"]
    assert list(slices["turn"]) == ["01", "1", "2", "9", "10"]
    assert list(slices["intent"]) == ["i01", "i1", "i2", "i9", "i10"]
    assert list(slices) == ["answerable", "intent", "turn"]
