"""Untrusted text (tag values, case ids, run names, file names, messages) made safe for
the medium it is written to. The HTML reports escape with :func:`html.escape`; this module
is the one place for the others:

- :func:`term`: a terminal line. Control characters (ESC and every other C0/C1 control,
  DEL) and the bidirectional overrides are shown as ``\\x1b``, ``\\u202e``, ... so a tag
  value cannot move the cursor, recolour, retitle the terminal or reorder what it shows.
- :func:`md`: Markdown text inline or in a table cell (report.md, compare.md, a decision
  record, the MLflow run note): one line (every line break a space), ``|`` escaped for
  tables, a ``<`` that could open an HTML tag or an autolink (``<script>``,
  ``<img onerror=...>``, ``<http://...>``) written as ``&lt;``, the ``](`` of a link or
  image written ``]&#40;``, backticks escaped, and a backslash before punctuation (it would
  escape it: ``\\|``) doubled; controls shown as by
  :func:`term`. Text that holds none of these is unchanged.
- :func:`md_code`: text inside a raglab code span (`` `KEY` ``).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["md", "md_code", "term", "term_lines"]

#: bidirectional embeddings, overrides and isolates (text shown in another order)
_BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
# control characters, bidi overrides and lone surrogates (text decoded from JSON may hold
# one; no stream can encode it)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f" + _BIDI + "\ud800-\udfff]")
_LINE_BREAKS = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]+")
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
#: a backslash that would escape the ASCII punctuation after it (``\|`` ends no cell)
_ESCAPING_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~])")


def _visible(m: re.Match[str]) -> str:
    code = ord(m.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def term(text: Any) -> str:
    """``text`` for a terminal: control characters, bidi overrides and lone surrogates made
    visible (a line break too: what is printed as one line stays one line)."""
    return _CONTROL.sub(_visible, str(text))


def term_lines(text: Any) -> str:
    """Several terminal lines: :func:`term` of each, the line breaks between them kept."""
    return "\n".join(term(line) for line in str(text).split("\n"))


def md(text: Any) -> str:
    """``text`` as Markdown that renders as that text, on one line, in a table cell too."""
    s = _LINE_BREAKS.sub(" ", str(text))
    s = s.replace("\t", " ")
    s = term(s)
    s = _ESCAPING_BACKSLASH.sub(r"\\\\", s)  # (a lone one, as in `\frac`, is literal)
    s = s.replace("`", "\\`").replace("|", "\\|")
    s = _TAG_OPEN.sub("&lt;", s)
    return s.replace("](", "]&#40;")


def md_code(text: Any) -> str:
    """``text`` for the inside of a code span raglab writes (backticks cannot close it; no
    escape works inside one, so they become ``'``; one line; ``|`` escaped for tables)."""
    s = term(_LINE_BREAKS.sub(" ", str(text)).replace("\t", " "))
    return s.replace("`", "'").replace("|", "\\|")
