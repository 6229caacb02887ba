"""Why cases failed: the most frequent errors of a run, each with its count and one case.

Errors are grouped by their message with the parts that name one case or one moment (numbers,
quoted values, addresses) set aside, so "connection refused" on 228 cases is one row, not 228;
each row keeps one message as it was, and the id of a case that had it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

#: rows kept in ``metrics.json`` (``error_summary``) and printed
TOP = 5
_VARYING = re.compile(r"'[^']*'|\"[^\"]*\"|https?://\S+|\b0x[0-9a-f]+\b|\d+(?:\.\d+)?", re.I)


def error_kind(message: str) -> str:
    """The message with its per-case parts replaced (the grouping key)."""
    return _VARYING.sub("…", message)


def error_summary(records: Iterable[Mapping[str, Any]], top: int = TOP) -> list[dict[str, Any]]:
    """``[{"count", "error", "example_case_id"}]``, most frequent first (ties: first seen)."""
    counts: Counter[str] = Counter()
    example: dict[str, tuple[str, str]] = {}
    for r in records:
        err = r.get("error")
        if not err:
            continue
        kind = error_kind(err)
        counts[kind] += 1
        example.setdefault(kind, (err, r["case_id"]))
    return [{"count": n, "error": example[k][0], "example_case_id": example[k][1]}
            for k, n in counts.most_common(top)]


def summary_lines(summary: list[dict[str, Any]], width: int = 160) -> list[str]:
    """The console lines of :func:`error_summary` (each message cut to ``width``)."""
    return [f"{row['count']} x {_cut(row['error'], width)} (e.g. case {row['example_case_id']})"
            for row in summary]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."
