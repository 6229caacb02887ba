"""How a metric value is printed, everywhere (run summary, reports): ``n/a`` for a value
that does not apply, integers without decimals, four significant digits otherwise."""

from __future__ import annotations

import math
from typing import Any


def num(value: Any) -> float | None:
    """A finite float, or None (for None, text, booleans, NaN and infinities)."""
    if value is None or isinstance(value, (str, bool)):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f


def fmt(value: Any) -> str:
    f = num(value)
    if f is None:
        return "n/a"
    if f == int(f) and abs(f) >= 1:
        return str(int(f))
    return f"{f:.4g}" if abs(f) >= 1e-3 or f == 0 else f"{f:.2e}"


def section_markdown(title: str, notes: list[str], header: list[str],
                     rows: list[list[str]], table: Any, escape: Any) -> list[str]:
    """A report section in Markdown: its title, each note a paragraph, then its table
    (``table``/``escape``: the report's own)."""
    out = [f"## {title}", ""]
    for n in notes:
        out += [escape(n), ""]
    return out + [*table(header, rows), ""]


def section_html(title: str, lead: str | None, note: str, header: list[str],
                 rows: list[list[str]], table: Any, **table_kw: Any) -> list[str]:
    """The same section in HTML: the title, a leading paragraph (if any), the note in the
    smaller print, then the table."""
    from html import escape

    return [f"<h2>{escape(title)}</h2>",
            *([f"<p>{escape(lead)}</p>"] if lead is not None else []),
            f"<p class=\"sub\">{escape(note)}</p>", table(header, rows, **table_kw)]
