"""Bad traces, counted by kind; the first of each kind kept with its file, line and trace id;
and what the source was read as (its format, its bad lines), said in one line."""

from __future__ import annotations

from dataclasses import dataclass, field

from raglab.secrets import clip_line

#: kinds of bad trace (not used), in the order they are reported
MALFORMED = "malformed line"
NO_ROOT = "no root span"
CYCLE = "cycle of parent ids"
NO_END = "missing end time"
BAD_TIME = "bad time"  # NaN, Infinity, negative or past 2**64 ns
TOO_LARGE = "attribute value too large"
TOO_MANY = "too many spans"
NO_RETRIEVER = "no retriever span"
NO_DOC_ID = "document without an id"
NO_CONTENT = "no content"  # GenAI content capture is opt-in: noted, never an error
#: replay of conversations: a session's k-th trace does not ask its turn's question
TURN_QUESTION = "turn question differs"
KINDS = (MALFORMED, NO_ROOT, CYCLE, NO_END, BAD_TIME, TOO_LARGE, TOO_MANY, NO_RETRIEVER,
         NO_DOC_ID, NO_CONTENT, TURN_QUESTION)


@dataclass
class Problems:
    """Counts by kind, and the first of each kind (``FILE:LINE trace ID: message``)."""

    counts: dict[str, int] = field(default_factory=dict)
    first: dict[str, str] = field(default_factory=dict)
    #: what the source was read as ("OTLP JSON lines", "one OTLP JSON document", ...)
    fmt: str = ""
    #: malformed lines (no trace id: not JSON, not a request), and the first of them
    bad_lines: int = 0
    first_line: str = ""

    def add(self, kind: str, source: str, line: int | None, trace_id: str | None,
            message: str = "") -> None:
        n = self.counts.get(kind, 0)
        self.counts[kind] = n + 1
        if kind == MALFORMED and not trace_id:
            self.bad_lines += 1
            if self.bad_lines == 1:
                self.first_line = (f"line {line}: " if line is not None else "") + clip_line(
                    message, 80)
        if not n:
            where = source + (f":{line}" if line is not None else "")
            if trace_id:
                where += f" trace {trace_id}"
            self.first[kind] = f"{where}: {kind}" + (f" ({clip_line(message, 200)})"
                                                      if message else "")

    @property
    def bad(self) -> int:
        """Traces not used because they are broken (no-content traces are not counted)."""
        return sum(n for k, n in self.counts.items() if k != NO_CONTENT)

    def ordered(self) -> list[tuple[str, int, str]]:
        """``(kind, count, first)`` for each kind seen, in :data:`KINDS` order."""
        order = {k: i for i, k in enumerate(KINDS)}
        return [(k, self.counts[k], self.first[k])
                for k in sorted(self.counts, key=lambda k: order.get(k, len(order)))]

    def account(self, used: int) -> str:
        """``read as FORMAT: N traces, B bad traces, L bad lines (line 1: not JSON ...)``:
        what was read (``used``: the traces the caller kept)."""
        parts = [f"{used} trace{'' if used == 1 else 's'}"]
        traces = self.bad - self.bad_lines
        if traces:
            parts.append(f"{traces} bad trace{'' if traces == 1 else 's'}")
        if self.counts.get(NO_CONTENT):
            parts.append(f"{self.counts[NO_CONTENT]} without content")
        if self.bad_lines:
            parts.append(f"{self.bad_lines} bad line{'' if self.bad_lines == 1 else 's'} "
                         f"({self.first_line})")
        return f"read as {self.fmt or 'traces'}: " + ", ".join(parts)

    def summary(self) -> str:
        """One line: ``N not used (KIND N, ...)`` ('' when none)."""
        if not self.counts:
            return ""
        return ", ".join(f"{k}: {n}" for k, n, _ in self.ordered())
