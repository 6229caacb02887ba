"""Per-window figures of judged traffic lines, and the alerts (pure functions).

Judged metrics (:data:`JUDGED`, the declarations reported by the monitor; on the sampled
lines; a line's value is ``None`` where it does not apply, e.g. faithfulness of an
abstention, and a window's value is the mean of the lines where it applies):
``faithfulness``, ``contradicted_claim_rate``, ``relevance`` and
``reference_free_context_precision`` (share of context passages that support at least one
claim of the answer, as judged by the grader; no labels). Retrieval statistics (on every
line of the window):
``top1_score`` mean and 10th/50th/90th percentiles, ``no_hits_rate`` (lines that retrieved
nothing) and ``feedback_down_rate`` (``down`` among lines with ``up``/``down`` feedback).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from raglab.metrics.catalog import MONITORED as JUDGED


@dataclass
class LineResult:
    window: datetime
    top1: float | None
    has_hits: bool
    feedback: str | None
    sampled: bool
    metrics: dict[str, float | None] = field(default_factory=dict)  # judged lines only
    grader_error: bool = False


def _mean(vals: Sequence[float]) -> float | None:
    return float(np.mean(vals)) if len(vals) else None


def window_table(results: Sequence[LineResult], seconds: int) -> list[dict[str, Any]]:
    by: dict[datetime, list[LineResult]] = {}
    for r in results:
        by.setdefault(r.window, []).append(r)
    out = []
    for start in sorted(by):
        rs = by[start]
        judged = [r for r in rs if r.sampled and not r.grader_error]
        scores = [r.top1 for r in rs if r.top1 is not None]
        fb = [r.feedback.strip().lower() for r in rs
              if r.feedback and r.feedback.strip().lower() in ("up", "down")]
        w: dict[str, Any] = {
            "start": start.isoformat(), "end": (start + timedelta(seconds=seconds)).isoformat(),
            "lines": len(rs), "sampled": sum(r.sampled for r in rs), "judged": len(judged),
            "grader_errors": sum(r.grader_error for r in rs)}
        for name in JUDGED:
            vals = [v for r in judged if (v := r.metrics.get(name)) is not None]
            w[name] = _mean(vals)
            w[f"{name}.n"] = len(vals)
        w["top1_score.n"] = len(scores)
        w["top1_score.mean"] = _mean(scores)
        for q in (10, 50, 90):
            w[f"top1_score.p{q}"] = float(np.percentile(scores, q)) if scores else None
        w["no_hits_rate"] = _mean([0.0 if r.has_hits else 1.0 for r in rs])
        w["feedback_down_rate"] = _mean([1.0 if f == "down" else 0.0 for f in fb])
        w["_scores"] = scores
        out.append(w)
    return out


def find_alerts(windows: list[dict[str, Any]], baseline_scores: Sequence[float] | None, *,
                max_contradicted: float, drift_p: float, drift_min_effect: float,
                min_lines: int) -> list[dict[str, Any]]:
    """The alerts of every window (and the drift test's figures stored in the window)."""
    from scipy.stats import ks_2samp

    alerts: list[dict[str, Any]] = []
    base = np.asarray(baseline_scores if baseline_scores is not None else [], dtype=float)
    for w in windows:
        rate, n = w["contradicted_claim_rate"], w["contradicted_claim_rate.n"]
        if rate is not None and n >= min_lines and rate > max_contradicted:
            alerts.append({
                "kind": "contradicted_claim_rate", "window_start": w["start"],
                "window_end": w["end"], "value": rate, "threshold": max_contradicted, "n": n,
                "message": f"window {w['start']}: contradicted_claim_rate {rate:.3f} > "
                           f"{max_contradicted:g} (monitor.max_contradicted; {n} judged lines)"})
        scores = np.asarray(w["_scores"], dtype=float)
        w["drift.ks_d"] = w["drift.p_value"] = None
        if baseline_scores is None or len(scores) < min_lines or len(base) < min_lines:
            continue
        res = ks_2samp(scores, base)
        d, p = float(res.statistic), float(res.pvalue)
        w["drift.ks_d"], w["drift.p_value"] = d, p
        if p < drift_p and d >= drift_min_effect:
            alerts.append({
                "kind": "retrieval_score_drift", "window_start": w["start"],
                "window_end": w["end"], "ks_d": d, "p_value": p, "n": int(len(scores)),
                "baseline_n": int(len(base)), "median": float(np.median(scores)),
                "baseline_median": float(np.median(base)),
                "message": f"window {w['start']}: top-1 retrieval scores shifted from the "
                           f"baseline (KS D {d:.3f} >= {drift_min_effect:g}, p {p:.2g} < "
                           f"{drift_p:g}; median {np.median(scores):.3g} vs "
                           f"{np.median(base):.3g}; {len(scores)} vs {len(base)} lines)"})
    return alerts
