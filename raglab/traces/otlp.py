"""OTLP JSON traces, streamed: the OpenTelemetry Collector's file exporter writes one
``ExportTraceServiceRequest`` a line (``resourceSpans`` > ``scopeSpans`` > ``spans``); a
single JSON document (one request, or a list of them) is read too.

Ids are hex as OTLP/JSON writes them (base64, as protobuf's generic JSON mapping writes
bytes, is accepted and turned into hex); attribute values are ``AnyValue`` objects
(``stringValue``, ``intValue`` as a string, ``doubleValue``, ``boolValue``, ``arrayValue``,
``kvlistValue``, ``bytesValue``).

Spans of one trace may arrive over several lines (one batch a line). A trace is complete
once its root span (no ``parentSpanId``) has been read and :data:`SETTLE_LINES` more lines
brought no span of it; a trace without a root is closed when :data:`STALE_LINES` lines
passed without a span of it, or when more than :data:`MAX_OPEN` traces are open (the
oldest first), or at the end of the file. A trace over :data:`MAX_SPANS` spans, with an
attribute value over :data:`MAX_VALUE_CHARS` characters or with a time that is not one
(NaN, Infinity, negative, past 2**64 ns) is dropped as it is read (only its id and counts
are kept), so memory stays bounded by the open traces, not by the file. A byte-order mark
at the start of the file is skipped.
"""

from __future__ import annotations

import base64
import binascii
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic_core import from_json

from raglab.data.io import MAX_LINE_BYTES
from raglab.traces import problems as P
from raglab.traces.spans import Span, Trace

SETTLE_LINES = 2
STALE_LINES = 10_000
MAX_OPEN = 10_000
MAX_SPANS = 10_000
MAX_VALUE_CHARS = 1 << 20
#: a single (not line-delimited) JSON document is read whole, up to this size
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
_READ_BUFFER = 1 << 20
_BOM = b"\xef\xbb\xbf"
#: OTLP times are unsigned 64-bit nanoseconds since the Unix epoch
_NANOS_END = 1 << 64


def _hex(raw: Any) -> str:
    """A trace or span id as lowercase hex ('' for none): hex as OTLP/JSON writes it (32
    or 16 characters), or base64 as protobuf's generic JSON mapping writes bytes (24 or 12
    characters, told apart by the length alone)."""
    if not raw or not isinstance(raw, str):
        return ""
    n = len(raw)
    if n == 32 or n == 16:
        return raw if raw.islower() or raw.isdigit() else raw.lower()
    try:
        return base64.b64decode(raw, validate=True).hex()
    except (binascii.Error, ValueError):
        return raw


class _TooLarge(Exception):
    pass


def value(v: Any) -> Any:
    """An OTLP ``AnyValue`` as a Python value."""
    if not isinstance(v, dict) or not v:
        return None
    if "stringValue" in v:
        s = v["stringValue"]
        if isinstance(s, str) and len(s) > MAX_VALUE_CHARS:
            raise _TooLarge(len(s))
        return s
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return None
    if "doubleValue" in v:
        d = v["doubleValue"]
        return float(d) if isinstance(d, (int, float, str)) else None
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [value(x) for x in (v["arrayValue"] or {}).get("values") or ()]
    if "kvlistValue" in v:
        return {kv.get("key"): value(kv.get("value"))
                for kv in (v["kvlistValue"] or {}).get("values") or () if isinstance(kv, dict)}
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _attrs(items: Any, checked: bool = True) -> dict[str, Any]:
    """OTLP ``key``/``value`` pairs as a dict; ``checked=False`` when the line they came
    from is too short to hold a value over :data:`MAX_VALUE_CHARS` (no size check)."""
    if not items:
        return {}
    if not checked:
        return {a["key"]: v["stringValue"] if "stringValue" in v else value(v)
                for a in items if (v := a["value"]) is not None}
    out: dict[str, Any] = {}
    for a in items:
        out[a["key"]] = value(a["value"])
    return out


class _BadTime(Exception):
    pass


def _nanos(v: Any) -> int | None:
    """A time in nanoseconds since the epoch (None: absent, or 0); :class:`_BadTime` for a
    value that is not one (NaN, Infinity, negative, 2**64 or more, not a number)."""
    if v is None:
        return None
    try:
        n = int(v)
    except (TypeError, ValueError, OverflowError):
        raise _BadTime(v) from None
    if not 0 <= n < _NANOS_END:
        raise _BadTime(v)
    return n or None


def _shown(v: Any) -> str:
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


class _Open:
    __slots__ = ("trace", "last", "rooted", "dropped", "count", "message")

    def __init__(self, trace: Trace, line: int):
        self.trace, self.last, self.rooted = trace, line, False
        self.dropped: str | None = None  # the problem kind, once the trace is dropped
        self.count, self.message = 0, ""


class OtlpReader:
    """``for trace in OtlpReader(path, problems)``: each complete trace once."""

    def __init__(self, path: str | Path, problems: P.Problems):
        self.path, self.problems = Path(path), problems
        self.source = str(path)
        self._open: dict[str, _Open] = {}
        self._ready: deque[tuple[int, str]] = deque()

    def __iter__(self) -> Iterator[Trace]:
        doc = self._document()
        self.problems.fmt = "OTLP JSON lines" if doc is None else "one OTLP JSON document"
        if doc is not None:
            for req in doc if isinstance(doc, list) else [doc]:
                self._add(req, 1)
            yield from self._close_all()
            return
        with open(self.path, "rb", buffering=_READ_BUFFER) as fh:
            lineno = 0
            while True:
                raw = fh.readline(MAX_LINE_BYTES + 1)
                if not raw:
                    break
                lineno += 1
                if lineno == 1 and raw.startswith(_BOM):
                    raw = raw[len(_BOM):]
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    while raw and not raw.endswith(b"\n"):  # skip the rest of the line
                        raw = fh.readline(MAX_LINE_BYTES)
                    self.problems.add(P.MALFORMED, self.source, lineno, None,
                                      f"line longer than {MAX_LINE_BYTES >> 20} MiB")
                    continue
                if not raw or raw.isspace():
                    continue
                try:
                    req = from_json(raw)
                except ValueError as e:
                    self.problems.add(P.MALFORMED, self.source, lineno, None, f"not JSON: {e}")
                    continue
                self._add(req, lineno, len(raw) > MAX_VALUE_CHARS)
                yield from self._due(lineno)
        yield from self._close_all()

    def _document(self) -> Any:
        """The file's one JSON document, when it is not line-delimited (else None): neither
        of its first two lines is JSON on its own (a JSON Lines file with a bad first line
        is not read whole), and the whole file is."""
        lines: list[bytes] = []
        with open(self.path, "rb") as fh:
            while len(lines) < 2:
                line = fh.readline(MAX_LINE_BYTES + 1)
                if not line:
                    break
                if fh.tell() == len(line):  # the first line
                    line = line.removeprefix(_BOM)
                if line and not line.isspace():
                    lines.append(line)
        if len(lines) < 2:
            return None
        for line in lines:
            try:
                from_json(line)
                return None  # a line that is a whole document: JSON Lines
            except ValueError:
                pass
        if self.path.stat().st_size > MAX_DOCUMENT_BYTES:
            return None  # read line by line: its lines are counted as malformed
        try:
            return from_json(self.path.read_bytes().removeprefix(_BOM))
        except ValueError:
            return None

    def _add(self, req: Any, lineno: int, checked: bool = True) -> None:
        if not isinstance(req, dict) or not isinstance(req.get("resourceSpans"), list):
            self.problems.add(P.MALFORMED, self.source, lineno, None,
                              "not an OTLP ExportTraceServiceRequest (no resourceSpans)")
            return
        try:
            for rs in req.get("resourceSpans") or ():
                resource = _attrs((rs.get("resource") or {}).get("attributes"), checked)
                for ss in rs.get("scopeSpans") or ():
                    for s in ss.get("spans") or ():
                        self._span(s, resource, lineno, checked)
        except (AttributeError, KeyError, TypeError) as e:
            self.problems.add(P.MALFORMED, self.source, lineno, None,
                              f"not an OTLP ExportTraceServiceRequest ({e!r})")

    def _span(self, s: dict[str, Any], resource: dict[str, Any], lineno: int,
              checked: bool) -> None:
        tid = s.get("traceId")
        if type(tid) is not str or len(tid) != 32:  # (hex, as the Collector writes ids)
            tid = _hex(tid)
        o = self._open.pop(tid, None)
        if o is None:
            o = _Open(Trace(tid, self.source, lineno), lineno)
        self._open[tid] = o  # (re)inserted last: the dict is in order of last touch
        o.last = lineno
        o.count += 1
        if o.dropped is None and o.count > MAX_SPANS:
            o.dropped, o.message = P.TOO_MANY, f"more than {MAX_SPANS:,} spans"
            o.trace.spans = []
        if o.dropped is not None:
            return
        try:
            attrs = _attrs(s.get("attributes"), checked)
        except _TooLarge as e:
            o.dropped = P.TOO_LARGE
            o.message = (f"span {s.get('name')!r}: a value of {e.args[0]:,} characters "
                         f"(at most {MAX_VALUE_CHARS:,})")
            o.trace.spans = []
            return
        if resource and not o.trace.info:
            o.trace.info["resource"] = resource
        key = "startTimeUnixNano"
        try:
            start = _nanos(s.get(key))
            key = "endTimeUnixNano"
            end = _nanos(s.get(key))
        except _BadTime as e:
            o.dropped = P.BAD_TIME
            o.message = (f"span {s.get('name')!r}: {key} is {_shown(e.args[0])}, not a count "
                         "of nanoseconds since 1970 below 2**64")
            o.trace.spans = []
            return
        parent, sid = s.get("parentSpanId") or "", s.get("spanId")
        if parent and (type(parent) is not str or len(parent) != 16):
            parent = _hex(parent)
        if type(sid) is not str or len(sid) != 16:
            sid = _hex(sid)
        o.trace.spans.append(Span(sid, parent, str(s.get("name") or ""), start, end, attrs))
        if not parent and not o.rooted:
            o.rooted = True
            self._ready.append((lineno + SETTLE_LINES, tid))

    def _due(self, lineno: int) -> Iterator[Trace]:
        ready, opened = self._ready, self._open
        while ready and ready[0][0] <= lineno:
            _, tid = ready.popleft()
            o = opened.get(tid)
            if o is None:
                continue
            if o.last + SETTLE_LINES > lineno:  # a span came since: wait again
                ready.append((o.last + SETTLE_LINES, tid))
                continue
            yield from self._close(tid)
        while opened:  # stale or too many open: the least recently touched first
            tid, o = next(iter(opened.items()))
            if o.last + STALE_LINES > lineno and len(opened) <= MAX_OPEN:
                break
            yield from self._close(tid)

    def _close(self, tid: str) -> Iterator[Trace]:
        o = self._open.pop(tid)
        if o.dropped is not None:
            self.problems.add(o.dropped, self.source, o.trace.line, tid, o.message)
        else:
            yield o.trace

    def _close_all(self) -> Iterator[Trace]:
        while self._open:
            yield from self._close(next(iter(self._open)))
