"""Aggregation of per-case metrics: overall and per slice (means of the values that apply).

Slices: every tag key of the cases, plus ``answerable`` (``yes``/``no``). A metric with no
applicable case in a group is ``None`` (never NaN). Overall, each latency also gets its
median and 95th percentile (``latency_ms.total.p50``, ``latency_ms.total.p95``; linear
interpolation between the cases' values, numpy's default).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any


def slice_keys(record: dict[str, Any]) -> dict[str, str]:
    keys = {k: str(v) for k, v in (record.get("tags") or {}).items()}
    keys["answerable"] = "yes" if record["gold"]["answerable"] else "no"
    return keys


class _Table:
    """The cases' metric values as one matrix (NaN where a metric does not apply), so each
    group's means are column means over its rows."""

    def __init__(self, records: Sequence[dict[str, Any]], names: Iterable[str]):
        import numpy as np

        seen: dict[str, None] = {}
        for r in records:
            seen.update(dict.fromkeys(r.get("metrics") or {}))
        listed = list(dict.fromkeys(names))
        self.names = list(dict.fromkeys([*listed, *sorted(n for n in seen if n not in listed)]))
        col = {n: j for j, n in enumerate(self.names)}
        nan = float("nan")
        rows = []
        for r in records:
            row = [nan] * len(self.names)
            for name, v in (r.get("metrics") or {}).items():
                if v is not None:
                    row[col[name]] = v
            rows.append(row)
        self.values = np.array(rows, dtype=float).reshape(len(records), len(self.names))

    def means(self, rows: Any = None) -> dict[str, Any]:
        """``{metric: mean over the rows where it applies, or None}`` (all rows by default)."""
        import numpy as np

        sub = self.values if rows is None else self.values[rows]
        present = ~np.isnan(sub)
        counts = present.sum(axis=0)
        sums = np.where(present, sub, 0.0).sum(axis=0)
        return {name: (float(total / n) if n else None)
                for name, total, n in zip(self.names, sums.tolist(), counts.tolist())}


def mean_metrics(records: Sequence[dict[str, Any]], names: Iterable[str]) -> dict[str, Any]:
    """Each metric's mean over the records where it applies (None where none does): the
    metrics in ``names`` first, then any other the records hold, sorted."""
    return _Table(records, names).means()


def latency_percentiles(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """``latency_ms.{stage}.p50`` and ``.p95`` over the cases that report the stage."""
    values: dict[str, list[float]] = defaultdict(list)
    for r in records:
        for name, v in (r.get("metrics") or {}).items():
            if v is not None and name.startswith("latency_ms."):
                values[name].append(float(v))
    if not values:
        return {}
    import numpy as np

    out: dict[str, float] = {}
    for name in sorted(values):
        p50, p95 = np.percentile(values[name], [50, 95])
        out[f"{name}.p50"] = float(p50)
        out[f"{name}.p95"] = float(p95)
    return out


def aggregate(records: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """``{"overall": {...}, "slices": {TAG_KEY: {TAG_VALUE: {"n": N, ...}}}}``."""
    groups: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, r in enumerate(records):
        for k, v in slice_keys(r).items():
            groups[k][v].append(i)
    table = _Table(records, names)
    slices = {k: {v: {"n": len(rows), **table.means(rows)} for v, rows in sorted(vals.items())}
              for k, vals in sorted(groups.items())}
    overall = table.means()
    overall.update(latency_percentiles(records))
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
