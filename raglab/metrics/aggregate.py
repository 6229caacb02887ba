"""Aggregation of per-case metrics: overall and per slice (means of the values that apply).

In a weighted run (records with a ``weight``: raglab.data.weights) every mean is weighted,
``sum w v / sum w`` over the cases where the metric applies; the latency percentiles stay
those of the cases. Slices: every tag key of the cases, plus ``answerable`` (``yes``/``no``).
A metric with no applicable case in a group is ``None`` (never NaN). Overall, each latency
also gets its median and 95th percentile (``latency_ms.total.p50``, ``latency_ms.total.p95``; linear
interpolation between the cases' values, numpy's default): declared here (``DECLARED``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import reduce
from operator import add
from typing import Any

from raglab.metrics.declaration import MetricSpec
from raglab.metrics.operational import LATENCY
from raglab.text.normalize import natural_key

#: the percentiles of each latency reported overall, by suffix (``latency_ms.total.p95``)
PERCENTILES = {"p50": 50, "p95": 95}
_PERCENTILE_MEANINGS = {
    "p50": "median of `latency_ms.{stage}` over the cases (`metrics.json` overall only)",
    "p95": "95th percentile of `latency_ms.{stage}` over the cases (overall only)",
}

DECLARED: tuple[MetricSpec, ...] = tuple(
    MetricSpec(f"{LATENCY}*.{suffix}", None, "lower", "latency", None,
               _PERCENTILE_MEANINGS[suffix]) for suffix in PERCENTILES)


def slice_keys(record: Mapping[str, Any]) -> dict[str, str]:
    """A record's slices: its tags, and ``answerable`` (yes for a record without gold).
    The tag ``conversation`` is not a slice: it names the conversation a turn belongs to
    (the unit comparisons resample, raglab.data.conversation), a slice of a few turns."""
    keys = {k: str(v) for k, v in (record.get("tags") or {}).items() if k != "conversation"}
    keys["answerable"] = "yes" if (record.get("gold") or {}).get("answerable", True) else "no"
    return keys


def value_order(value: str) -> tuple:
    """The order of a tag's values in every output: the numbers in a value read as numbers
    (turn 1, 2, 10; not 1, 10, 2)."""
    return natural_key(value), value


def slice_order(group: tuple[str, str]) -> tuple:
    """The order of slices ``(tag key, value)``: by key, then :func:`value_order`."""
    return group[0], value_order(group[1])


class Aggregation:
    """The means of records, overall and per slice, given in chunks in case order: each
    mean's running sum goes on from one chunk to the next, so the result is that of all the
    records at once, to the last bit. ``names``: the run's metrics (in this order first,
    ``None`` where none applies), then any other metric a record has a value for, sorted."""

    def __init__(self, names: Iterable[str]):
        self.base = list(dict.fromkeys(names))
        #: group (``()`` overall, ``(tag key, value)``) -> metric -> [running sum, count]
        self.sums: dict[tuple, dict[str, list]] = {(): {}}
        self.sizes: dict[tuple, int] = {}  # records per slice group
        self.latencies: dict[str, list[float]] = {}  # overall values, in record order
        self.records: list[dict[str, Any]] = []  # for a sum that overflowed (see means)
        self.weighted = False                    # a record weighs other than 1

    def add(self, records: Sequence[dict[str, Any]]) -> None:
        """The next records, in order."""
        if not records:
            return
        self.records.extend(records)
        metrics = [r.get("metrics") or {} for r in records]
        known = set(self.base)
        names = self.base + sorted({n for m in metrics for n in m if n not in known})
        rows = [tuple(map(m.get, names)) for m in metrics]
        weights = [float(r.get("weight", 1.0)) for r in records]
        self.weighted = self.weighted or any(w != 1.0 for w in weights)
        self._sum((), names, rows, weights)
        for i, name in enumerate(names):
            if name.startswith(LATENCY):
                self.latencies.setdefault(name, []).extend(
                    float(row[i]) for row in rows if row[i] is not None)
        groups: dict[tuple, list[tuple]] = defaultdict(list)
        gweights: dict[tuple, list[float]] = defaultdict(list)
        for r, row, w in zip(records, rows, weights):
            for kv in slice_keys(r).items():
                groups[kv].append(row)
                gweights[kv].append(w)
        for kv, grows in groups.items():
            self.sizes[kv] = self.sizes.get(kv, 0) + len(grows)
            self._sum(kv, names, grows, gweights[kv])

    def _sum(self, group: tuple, names: list[str], rows: list[tuple],
             weights: list[float]) -> None:
        sums = self.sums.setdefault(group, {})
        plain = all(w == 1.0 for w in weights)
        for name, col in zip(names, zip(*rows)):
            missing = col.count(None)  # columns with no value skipped, with all used as they are
            if missing == len(col):
                continue
            # in record order, as a running sum (not sum(): from Python 3.12 it compensates
            # rounding, and the means would change with the interpreter)
            acc = sums.setdefault(name, [0.0, 0])
            if plain:
                vals = col if not missing else [v for v in col if v is not None]
                acc[0] = reduce(add, vals, acc[0])
                acc[1] += len(vals)
                continue
            pairs = [(v, w) for v, w in zip(col, weights) if v is not None]
            acc[0] = reduce(add, (w * v for v, w in pairs), acc[0])
            acc[1] = reduce(add, (w for _, w in pairs), acc[1])

    def means(self, group: tuple) -> dict[str, Any]:
        """The means of a group's records: the run's metrics in order (``None`` where
        none applies), then the others with a value, sorted."""
        sums = self.sums.get(group, {})
        known = set(self.base)
        out: dict[str, Any] = {}
        for name in self.base + sorted(n for n in sums if n not in known):
            acc = sums.get(name)
            if acc is None:
                out[name] = None
                continue
            total, n = acc
            if n == 0:                     # every case where it applies weighs 0
                out[name] = None
                continue
            # a sum that overflowed (values near the largest float): the mean of v / n
            out[name] = total / n if math.isfinite(total) else sum(
                w * v / n for v, w in self._values(group, name))
        return out

    def _values(self, group: tuple, name: str) -> Iterable[tuple[float, float]]:
        for r in self.records:
            if group and slice_keys(r).get(group[0]) != group[1]:
                continue
            v = (r.get("metrics") or {}).get(name)
            if v is not None:
                yield v, float(r.get("weight", 1.0))

    def result(self) -> dict[str, Any]:
        """``{"overall": {...}, "slices": {TAG_KEY: {TAG_VALUE: {"n": N, ...}}}}``."""
        slices: dict[str, dict[str, Any]] = {}
        for k, v in sorted(self.sizes, key=slice_order):
            slices.setdefault(k, {})[v] = {"n": self.sizes[(k, v)], **self.means((k, v))}
        overall = self.means(())
        for name in sorted(self.latencies):
            values = self.latencies[name]
            if values:
                for suffix, p in PERCENTILES.items():
                    overall[f"{name}.{suffix}"] = float(percentile(values, p))
        return {"overall": overall, "slices": slices}


def weight_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``{"weighted": True, "n_eff": ...}`` for a weighted run's metrics.json (Kish's
    effective sample size over its cases), ``{}`` for an unweighted one."""
    from raglab.data.weights import effective_size

    w = [float(r.get("weight", 1.0)) for r in records]
    if all(x == 1.0 for x in w):
        return {}
    return {"weighted": True, "n_eff": effective_size(w)}


def aggregate(records: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """``{"overall": {...}, "slices": {TAG_KEY: {TAG_VALUE: {"n": N, ...}}}}``."""
    agg = Aggregation(names)
    agg.add(records)
    return agg.result()


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile with linear interpolation between the sorted values (numpy's
    default method, to the last bit: the same interpolation, from the nearer end)."""
    v = sorted(values)
    h = (len(v) - 1) * (p / 100)
    lo = math.floor(h)
    hi = min(lo + 1, len(v) - 1)
    t = h - lo
    a, b = v[lo], v[hi]
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


def _cause_counts(records: Sequence[dict[str, Any]]) -> dict[str, int]:
    from raglab.metrics.diagnosis import CAUSES, diagnosis_of

    counts = dict.fromkeys(CAUSES, 0)
    for r in records:
        for cause in (diagnosis_of(r) or {}).get("causes", []):
            counts[cause] = counts.get(cause, 0) + 1
    return counts


def diagnosis_counts(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Cases per diagnosis cause (a case counts once for each of its causes), overall and per
    slice; ``primary`` counts each failed case once, under its primary cause, and ``failed``
    is the number of failed cases (with a diagnosis, raglab.metrics.diagnosis.failed):
    ``{"overall": {CAUSE: N}, "primary": {CAUSE: N}, "failed": N,
    "slices": {TAG_KEY: {TAG_VALUE: {CAUSE: N}}}}``."""
    from raglab.metrics.diagnosis import CAUSES, diagnosis_of

    primary = dict.fromkeys(CAUSES, 0)
    failed = 0
    groups: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        d = diagnosis_of(r)
        if d is not None:
            failed += 1
            primary[d["primary"]] = primary.get(d["primary"], 0) + 1
        for k, v in slice_keys(r).items():
            groups[k][v].append(r)
    slices = {k: {v: _cause_counts(vals[v]) for v in sorted(vals, key=value_order)}
              for k, vals in sorted(groups.items())}
    return {"overall": _cause_counts(records), "primary": primary, "failed": failed,
            "slices": slices}
