"""Aggregation of per-case metrics: overall and per slice (means of the values that apply).

Slices: every tag key of the cases, plus ``answerable`` (``yes``/``no``). A metric with no
applicable case in a group is ``None`` (never NaN). Overall, each latency also gets its
median and 95th percentile (``latency_ms.total.p50``, ``latency_ms.total.p95``; linear
interpolation between the cases' values, numpy's default).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from functools import reduce
from operator import add
from typing import Any


def slice_keys(record: dict[str, Any]) -> dict[str, str]:
    keys = {k: str(v) for k, v in (record.get("tags") or {}).items()}
    keys["answerable"] = "yes" if record["gold"]["answerable"] else "no"
    return keys


def mean_metrics(records: Sequence[dict[str, Any]], names: Iterable[str]) -> dict[str, Any]:
    """Each metric's mean over the records it applies to (``None`` when none): ``names`` in
    their order, then any other metric a record has a value for, sorted."""
    table = _Table(records, names)
    return table.means(table.rows)


class _Table:
    """The records' metric values as rows (one tuple per record, one column per name), read
    once, so that the overall means and every slice's are sums over columns."""

    def __init__(self, records: Sequence[dict[str, Any]], names: Iterable[str]):
        metrics = [r.get("metrics") or {} for r in records]
        base = list(dict.fromkeys(names))
        known = set(base)
        extra = sorted({n for m in metrics for n in m if n not in known})
        self.names = base + extra
        self.n_base = len(base)
        self.rows = [tuple(map(m.get, self.names)) for m in metrics]

    def columns(self, rows: Sequence[tuple]) -> Iterable[tuple]:
        return zip(*rows) if rows else [()] * len(self.names)

    def means(self, rows: Sequence[tuple]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for i, (name, col) in enumerate(zip(self.names, self.columns(rows))):
            vals = [v for v in col if v is not None]
            if not vals:
                if i < self.n_base:  # a metric of the run that applies to no record
                    out[name] = None
                continue
            # in record order, as a running sum (not sum(): from Python 3.12 it
            # compensates rounding, and the means would change with the interpreter)
            total = reduce(add, vals, 0.0)
            n = len(vals)
            # a sum that overflowed (values near the largest float): the mean of v / n
            out[name] = total / n if math.isfinite(total) else sum(v / n for v in vals)
        return out

    def latency_percentiles(self) -> dict[str, float]:
        """``latency_ms.{stage}.p50`` and ``.p95`` over the cases that report the stage."""
        out: dict[str, float] = {}
        where = {n: i for i, n in enumerate(self.names) if n.startswith("latency_ms.")}
        for name in sorted(where):
            i = where[name]
            values = [float(row[i]) for row in self.rows if row[i] is not None]
            if values:
                out[f"{name}.p50"] = float(percentile(values, 50))
                out[f"{name}.p95"] = float(percentile(values, 95))
        return out


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


def aggregate(records: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """``{"overall": {...}, "slices": {TAG_KEY: {TAG_VALUE: {"n": N, ...}}}}``."""
    table = _Table(records, names)
    groups: dict[str, dict[str, list[tuple]]] = defaultdict(lambda: defaultdict(list))
    for r, row in zip(records, table.rows):
        for k, v in slice_keys(r).items():
            groups[k][v].append(row)
    slices = {k: {v: {"n": len(rows), **table.means(rows)} for v, rows in sorted(vals.items())}
              for k, vals in sorted(groups.items())}
    overall = table.means(table.rows)
    overall.update(table.latency_percentiles())
    return {"overall": overall, "slices": slices}


def _cause_counts(records: Sequence[dict[str, Any]]) -> dict[str, int]:
    from raglab.metrics.diagnosis import CAUSES

    counts = dict.fromkeys(CAUSES, 0)
    for r in records:
        for cause in (r.get("diagnosis") or {}).get("causes", []):
            counts[cause] = counts.get(cause, 0) + 1
    return counts


def diagnosis_counts(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Cases per diagnosis cause (a case counts once for each of its causes), overall and per
    slice; ``primary`` counts each failed case once, under its primary cause, and ``failed``
    is the number of cases with a diagnosis:
    ``{"overall": {CAUSE: N}, "primary": {CAUSE: N}, "failed": N,
    "slices": {TAG_KEY: {TAG_VALUE: {CAUSE: N}}}}``."""
    from raglab.metrics.diagnosis import CAUSES

    primary = dict.fromkeys(CAUSES, 0)
    failed = 0
    groups: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        d = r.get("diagnosis")
        if d:
            failed += 1
            primary[d["primary"]] = primary.get(d["primary"], 0) + 1
        for k, v in slice_keys(r).items():
            groups[k][v].append(r)
    slices = {k: {v: _cause_counts(rs) for v, rs in sorted(vals.items())}
              for k, vals in sorted(groups.items())}
    return {"overall": _cause_counts(records), "primary": primary, "failed": failed,
            "slices": slices}
