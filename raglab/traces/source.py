"""A trace source -> records (:func:`raglab.traces.mapping.to_record`), bad traces counted.

A source is an OTLP JSON file (:mod:`raglab.traces.otlp`) or ``mlflow://EXPERIMENT`` (an
id or a name, in the store :func:`raglab.tracking.mlflow_traces.store_uri` names). A file's
format is told from its content: from its first valid line (a JSON object; a byte-order
mark, blank lines and up to :data:`SNIFF_LINES` lines that are not one are passed over),
OTLP JSON when it has ``resourceSpans`` at the top; a single JSON document over several
lines when its start is ``{`` or ``[`` and ``"resourceSpans"`` comes soon; anything else is
raglab's own JSON Lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic_core import from_json

from raglab.data.io import MAX_LINE_BYTES
from raglab.traces import problems as P
from raglab.traces.mapping import BadTrace, to_record
from raglab.traces.spans import Span, Trace

MLFLOW = "mlflow://"
Format = Literal["auto", "otlp", "mlflow", "jsonl"]
_SNIFF_BYTES = 1 << 16
#: lines looked at for the first valid one
SNIFF_LINES = 100
_BOM = b"\xef\xbb\xbf"


def detect(source: str | Path, fmt: str = "auto") -> str:
    """``otlp``, ``mlflow`` or ``jsonl`` (``fmt`` when it is not ``auto``)."""
    if fmt != "auto":
        return fmt
    s = str(source)
    if s.startswith(MLFLOW):
        return "mlflow"
    p = Path(s)
    if not p.is_file():
        return "jsonl"
    with open(p, "rb") as fh:
        head = fh.read(_SNIFF_BYTES)
        start = len(_BOM) if head.startswith(_BOM) else 0
        head = head[start:].lstrip()
        fh.seek(start)
        valid: dict[str, Any] | None = None
        at_first = True  # the first valid line is the first line (blank ones aside)
        for _ in range(SNIFF_LINES):
            line = fh.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            if line.isspace():
                continue
            valid = _object(line)
            if valid is not None:
                break
            at_first = False
    if valid is not None and at_first:
        return "otlp" if "resourceSpans" in valid else "jsonl"
    if head[:1] in (b"{", b"[") and b'"resourceSpans"' in head:
        return "otlp"  # one document over several lines, or a torn first line
    return "otlp" if valid is not None and "resourceSpans" in valid else "jsonl"


def _object(line: bytes) -> dict[str, Any] | None:
    """The line's JSON object (the first of a list of them), if it is a non-empty one."""
    if line.isspace():
        return None
    try:
        obj = from_json(line)
    except ValueError:
        return None
    if isinstance(obj, list):
        obj = obj[0] if obj else None
    return obj if isinstance(obj, dict) and obj else None


def is_trace_source(source: str | Path) -> bool:
    return detect(source) in ("otlp", "mlflow")


def traces(source: str | Path, problems: P.Problems, fmt: str = "auto",
           tracking_uri: str | None = None) -> Iterator[Trace]:
    """The traces of ``source``, one at a time."""
    kind = detect(source, fmt)
    if kind == "mlflow":
        from raglab.tracking.mlflow_traces import read_traces, store_uri

        problems.fmt = "MLflow traces"
        for t in read_traces(str(source), store_uri(tracking_uri)):
            yield from_mlflow(t, str(source))
    elif kind == "otlp":
        from raglab.traces.otlp import OtlpReader

        yield from OtlpReader(source, problems)
    else:
        raise ValueError(f"{source}: not a trace source ({kind})")


def records(source: str | Path, problems: P.Problems, fmt: str = "auto",
            doc_id_key: str = "doc_id", case_id_attribute: str = "raglab.case_id",
            tracking_uri: str | None = None) -> Iterator[tuple[int | None, dict[str, Any]]]:
    """``(line, record)`` for each readable trace of ``source``; the others are counted in
    ``problems`` by kind."""
    for t in traces(source, problems, fmt, tracking_uri):
        try:
            yield t.line, to_record(t, doc_id_key, case_id_attribute)
        except BadTrace as e:
            problems.add(e.kind, t.source, t.line, t.trace_id, e.message)


def from_mlflow(t: dict[str, Any], source: str) -> Trace:
    """A trace of :func:`raglab.tracking.mlflow_traces.read_traces` as a :class:`Trace`."""
    spans = [Span(s["span_id"], s["parent_id"], s["name"], s["start_ns"], s["end_ns"],
                  s["attrs"]) for s in t["spans"]]
    meta = t.get("metadata") or {}
    info: dict[str, Any] = {"tags": t.get("tags") or {}}
    if meta.get("mlflow.trace.user"):
        info["user"] = meta["mlflow.trace.user"]
    if meta.get("mlflow.trace.session"):
        info["session"] = meta["mlflow.trace.session"]
    for key in ("request_preview", "response_preview"):  # (whole JSON only: never cut)
        if isinstance(t.get(key), str):
            try:
                info[key] = from_json(t[key])
            except ValueError:
                pass
    for a in t.get("assessments") or ():
        if "raglab.family" in (a.get("metadata") or {}):
            continue  # raglab's own verdict on the case (a pass/fail check), not a user's
        v = a.get("value")
        if isinstance(v, bool) or (isinstance(v, str) and v.lower() in ("up", "down")):
            info["feedback"] = ("up" if v else "down") if isinstance(v, bool) else v.lower()
            break
    return Trace(t["trace_id"], source, None, spans, info)
