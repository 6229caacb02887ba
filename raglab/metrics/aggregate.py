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
from typing import Any


def slice_keys(record: dict[str, Any]) -> dict[str, str]:
    keys = {k: str(v) for k, v in (record.get("tags") or {}).items()}
    keys["answerable"] = "yes" if record["gold"]["answerable"] else "no"
    return keys


def mean_metrics(records: Sequence[dict[str, Any]], names: Iterable[str]) -> dict[str, Any]:
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for r in records:
        for name, v in (r.get("metrics") or {}).items():
            if v is not None:
                sums[name] += v
                counts[name] += 1
    out: dict[str, Any] = {}
    all_names = list(dict.fromkeys([*names, *sorted(sums)]))
    for name in all_names:
        n = counts.get(name)
        if not n:
            out[name] = None
        elif math.isfinite(sums[name]):
            out[name] = sums[name] / n
        else:  # the sum overflowed (values near the largest float): the mean of v / n
            out[name] = sum(r["metrics"][name] / n for r in records
                            if (r.get("metrics") or {}).get(name) is not None)
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


def latency_percentiles(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """``latency_ms.{stage}.p50`` and ``.p95`` over the cases that report the stage."""
    values: dict[str, list[float]] = defaultdict(list)
    for r in records:
        for name, v in (r.get("metrics") or {}).items():
            if v is not None and name.startswith("latency_ms."):
                values[name].append(float(v))
    out: dict[str, float] = {}
    for name in sorted(values):
        out[f"{name}.p50"] = float(percentile(values[name], 50))
        out[f"{name}.p95"] = float(percentile(values[name], 95))
    return out


def aggregate(records: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """``{"overall": {...}, "slices": {TAG_KEY: {TAG_VALUE: {"n": N, ...}}}}``."""
    groups: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        for k, v in slice_keys(r).items():
            groups[k][v].append(r)
    slices = {k: {v: {"n": len(rs), **mean_metrics(rs, names)} for v, rs in sorted(vals.items())}
              for k, vals in sorted(groups.items())}
    overall = mean_metrics(records, names)
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
