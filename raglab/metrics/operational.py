"""Operational figures of one case: latencies, costs and errors (no family: no grader or
judging rule changes them). Declared here (``DECLARED``), next to the code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raglab.metrics.declaration import MetricSpec

#: prefix of the per-stage latencies (``latency_ms.retrieve``, ``latency_ms.total``)
LATENCY = "latency_ms."

DECLARED: tuple[MetricSpec, ...] = (
    MetricSpec(LATENCY + "*", None, "lower", "latency", None,
               "the system's own latency by stage, as measured when the stage ran, plus "
               "`total` (never less than the sum of the stages)"),
    MetricSpec("cost_usd_per_query", None, "lower", "cost", None,
               "the system's cost, from its usage (the Claude generator's tokens priced with "
               "`generator.prices`)"),
    MetricSpec("grading_cost_usd", None, "lower", "cost", None,
               "the grader's cost of the case, apart from the system's, as recorded when "
               "each judgment was made"),
    MetricSpec("error_rate", None, "lower", "binary", None,
               "cases with a system or grader error"),
)


def error_rate(record: Mapping[str, Any]) -> float:
    """``error_rate`` of one case: 1 when the system or a grader failed."""
    return 1.0 if record.get("error") else 0.0


def latencies(output: Mapping[str, Any]) -> dict[str, float]:
    """``latency_ms.{stage}`` for every stage the system reports."""
    return {f"{LATENCY}{stage}": float(ms)
            for stage, ms in (output.get("latency_ms") or {}).items()}


def cost_usd_per_query(output: Mapping[str, Any]) -> float | None:
    """The system's cost of the case, when its usage says (``usage.cost_usd``)."""
    usage = output.get("usage") or {}
    return float(usage["cost_usd"]) if "cost_usd" in usage else None


def grading_cost_usd(record: Mapping[str, Any]) -> Any:
    """The grader's cost of the case, as the run recorded it."""
    return record.get("grading_cost_usd")
