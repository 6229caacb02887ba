"""How much of a difference is grader noise: from the per-case variance over grader repeats.

A run made with ``grader.repeats=N`` (N > 1) keeps, on each record, ``repeats`` and
``repeat_variance`` (each graded metric's sample variance over the N judgments of the
case). The case's metric is the mean of those N values, so the grader's own noise in it has
variance ``var / N``. Over the ``n`` cases paired for a metric, the difference of the two
runs' means then carries grader noise with standard error

    noise_se = sqrt(sum_i (var_b,i / N_b + var_c,i / N_c)) / n

(a run without repeats contributes 0: its grader's noise is unknown, and the report says
which runs were repeated). ``noise_share`` is ``noise_se`` over the standard error implied
by the paired interval, ``(ci_high - ci_low) / (2 z)``: near 0, the interval is about cases;
near 1, it is mostly the grader's own disagreement with itself.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any


def _repeat_terms(rec: dict, metric: str) -> tuple[float, bool]:
    """(var / N of the case's metric, whether the record was repeated)."""
    n = rec.get("repeats")
    var = (rec.get("repeat_variance") or {}).get(metric)
    if not isinstance(n, int) or n < 2 or var is None:
        return 0.0, False
    return float(var) / n, True


def grader_noise(baseline: Any, candidate: Any, ids: list[str], rows: list[dict],
                 confidence: float) -> dict[str, dict]:
    """``{metric: {n, repeated: {baseline, candidate}, noise_se, interval_se, noise_share}}``
    for every overall row of a metric that either run judged with repeats (empty when no
    run was repeated)."""
    bid, cid = baseline.by_id(), candidate.by_id()
    repeated_metrics: set[str] = set()
    for src in (bid, cid):
        for case in ids:
            rv = src[case].get("repeat_variance")
            if rv and (src[case].get("repeats") or 0) > 1:
                repeated_metrics.update(rv)
    if not repeated_metrics:
        return {}
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    out: dict[str, dict] = {}
    for row in rows:
        metric = row["metric"]
        if row["slice"] is not None or metric not in repeated_metrics or not row["n"]:
            continue
        total, n, rep_b, rep_c = 0.0, 0, False, False
        for case in ids:
            b, c = bid[case], cid[case]
            if b["metrics"].get(metric) is None or c["metrics"].get(metric) is None:
                continue
            vb, rb = _repeat_terms(b, metric)
            vc, rc = _repeat_terms(c, metric)
            total += vb + vc
            rep_b, rep_c, n = rep_b or rb, rep_c or rc, n + 1
        if not n:
            continue
        noise_se = math.sqrt(total) / n
        interval_se = None
        if row["ci_low"] is not None and row["ci_high"] is not None:
            interval_se = (row["ci_high"] - row["ci_low"]) / (2 * z)
        share = None
        if interval_se:
            share = min(1.0, noise_se / interval_se)
        elif interval_se == 0.0:
            share = 0.0 if noise_se == 0 else 1.0
        out[metric] = {"n": n, "repeated": {"baseline": rep_b, "candidate": rep_c},
                       "noise_se": noise_se, "interval_se": interval_se,
                       "noise_share": share}
    return out
