"""Bad traces, counted by kind; the first of each kind kept with its file, line and trace id."""

from __future__ import annotations

from dataclasses import dataclass, field

from raglab.secrets import clip_line

#: kinds of bad trace (not used), in the order they are reported
MALFORMED = "malformed line"
NO_ROOT = "no root span"
CYCLE = "cycle of parent ids"
NO_END = "missing end time"
TOO_LARGE = "attribute value too large"
TOO_MANY = "too many spans"
NO_RETRIEVER = "no retriever span"
NO_DOC_ID = "document without an id"
NO_CONTENT = "no content"  # GenAI content capture is opt-in: noted, never an error
KINDS = (MALFORMED, NO_ROOT, CYCLE, NO_END, TOO_LARGE, TOO_MANY, NO_RETRIEVER, NO_DOC_ID,
         NO_CONTENT)


@dataclass
class Problems:
    """Counts by kind, and the first of each kind (``FILE:LINE trace ID: message``)."""

    counts: dict[str, int] = field(default_factory=dict)
    first: dict[str, str] = field(default_factory=dict)

    def add(self, kind: str, source: str, line: int | None, trace_id: str | None,
            message: str = "") -> None:
        n = self.counts.get(kind, 0)
        self.counts[kind] = n + 1
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

    def summary(self) -> str:
        """One line: ``N not used (KIND N, ...)`` ('' when none)."""
        if not self.counts:
            return ""
        return ", ".join(f"{k}: {n}" for k, n, _ in self.ordered())
