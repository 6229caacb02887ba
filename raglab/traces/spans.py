"""A span and a trace as the readers give them, whatever the source."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Span:
    """One span: ids as lowercase hex (``parent_id`` '' for a root), times in Unix
    nanoseconds (``end_ns`` None when the span never ended), attributes flattened
    (OTLP's ``key``/``value`` pairs as a dict; for MLflow, its span attributes with
    ``mlflow.spanInputs`` / ``mlflow.spanOutputs`` as decoded values)."""

    span_id: str
    parent_id: str
    name: str
    start_ns: int | None
    end_ns: int | None
    attrs: dict[str, Any]


@dataclass(slots=True)
class Trace:
    """The spans of one trace id, where they were read (the line of the first span), and
    what the source knows of the whole trace (MLflow's previews, tags, assessments)."""

    trace_id: str
    source: str
    line: int | None
    spans: list[Span] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
