"""What a run says when it ends: its summary on the terminal, and whether its error rate
fails it (``max_error_rate``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from raglab.metrics.catalog import HEADLINE
from raglab.report.format import fmt
from raglab.runner.failures import summary_lines


def error_rate_exceeded(metrics: dict[str, Any], max_error_rate: float) -> str | None:
    """The one line to fail a run with when its error rate is above ``max_error_rate`` (a
    run in which every case failed always fails), else None."""
    n, errors = metrics.get("n_cases") or 0, metrics.get("errors") or 0
    if n == 0 or errors == 0:
        return None
    rate = errors / n
    if rate > max_error_rate or errors == n:
        top = summary_lines(metrics.get("error_summary") or [], width=200)[:1]
        return (f"{errors} of {n} cases failed (error rate {rate:.0%} > max_error_rate "
                f"{max_error_rate:g}): the metrics do not measure the system"
                + (f"; most frequent: {top[0]}" if top else "")
                + "; run the same command again in the same run directory to retry the "
                "failed cases")
    return None


def summary_text(metrics: dict[str, Any], run_dir: Path,
                 calibration: dict[str, str] | None = None) -> str:
    o = metrics["overall"]
    rows = [
        ("cases", metrics["n_cases"]), ("quarantined", metrics["n_quarantined"]),
        ("errors", metrics["errors"]),
    ]
    for k in (*HEADLINE, "latency_ms.total"):
        if k in o:
            rows.append((k, fmt(o[k])))
    w = max(len(str(r[0])) for r in rows)
    lines = [f"raglab run: {run_dir}"] + [f"  {str(k).ljust(w)}  {v}" for k, v in rows]
    if metrics.get("error_summary"):  # why cases failed, most frequent first
        lines.append("  most frequent errors (all in records.jsonl):")
        lines += [f"    {x}" for x in summary_lines(metrics["error_summary"])]
    diag = metrics.get("diagnoses") or {}
    causes = {c: n for c, n in (diag.get("overall") or {}).items() if n}
    if diag:
        lines.append(f"  failed cases: {diag.get('failed', 0)}" + (
            " (" + ", ".join(f"{c} {n}" for c, n in causes.items()) + ")" if causes else ""))
    lines.append("  work: " + json.dumps(metrics["work"]))
    if "model_usage" in metrics:
        lines.append("  model usage: " + json.dumps(metrics["model_usage"]))
    if calibration is not None:  # each family's version and its kappa (raglab calibrate)
        versions = metrics.get("metric_versions") or {}
        fw = max((len(f) for f in versions), default=0)
        lines.append("  metric versions (calibration):")
        lines += [f"    {fam.ljust(fw)}  {ver}  {calibration.get(fam, 'uncalibrated')}"
                  for fam, ver in versions.items()]
    return "\n".join(lines)


def print_summary(metrics: dict[str, Any], run_dir: Path,
                  calibration: dict[str, str] | None = None) -> None:
    print(summary_text(metrics, run_dir, calibration), file=sys.stdout, flush=True)
