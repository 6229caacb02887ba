"""Sentence splitting and citation markers, shared by the chunkers, the generators, the
graders and the metrics.

:func:`sentence_spans` is the document split (chunking, context sentences): a sentence ends
after ``.!?:;`` (and any closing quote or bracket) followed by whitespace, at a blank line,
and before a list item. :func:`segments` refines it for answers and passages: a markdown
heading line (``# ...``) or a line that is bold only (``**Fees**``) is a segment of its own
and never glued to the sentence below it. Citation markers are ``[n]``, ``[n, m]`` or
``[n-m]`` (1-based passage numbers).
"""

from __future__ import annotations

import re
from typing import NamedTuple

SENTENCE_END = re.compile(r"(?<=[.!?:;])[\"')\]]*\s+|\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)")
MARKER = re.compile(r"[ \t]*\[\s*(\d{1,3}(?:\s*[,;\-\u2013]\s*\d{1,3})*)\s*\]")
HEADING_LINE = re.compile(r"^[ \t]*(?:#{1,6}[ \t]+(?P<h>[^\n]*?)[ \t#]*"
                          r"|(?:\*\*|__)(?P<b>[^\n*_]+?)(?:\*\*|__)[ \t]*:?)[ \t]*$", re.M)


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Sentence spans (trimmed) within text[start:end]."""
    end = len(text) if end is None else end
    out: list[tuple[int, int]] = []
    pos = start
    for m in SENTENCE_END.finditer(text, start, end):
        append_trimmed(text, pos, m.start(), out)
        pos = m.end()
    append_trimmed(text, pos, end, out)
    return out


def append_trimmed(text: str, s: int, e: int, out: list[tuple[int, int]]) -> None:
    """Append ``(s, e)`` to ``out`` with surrounding whitespace trimmed (nothing if empty)."""
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    if e > s:
        out.append((s, e))


class Segment(NamedTuple):
    """A sentence or a heading of a text: offsets into it, its text with whitespace
    collapsed (a heading without its ``#``/``**`` markup) and whether it is a heading."""

    start: int
    end: int
    text: str
    heading: bool


def segments(text: str) -> list[Segment]:
    """Headings apart, then the sentences of the text between them, in text order."""
    out: list[Segment] = []
    pos = 0
    for m in HEADING_LINE.finditer(text):
        out += _sentences(text, pos, m.start())
        h = (m.group("h") if m.group("h") is not None else m.group("b")).strip()
        if h:
            out.append(Segment(m.start(), m.end(), " ".join(h.split()), True))
        pos = m.end()
    out += _sentences(text, pos, len(text))
    return out


def _sentences(text: str, s: int, e: int) -> list[Segment]:
    return [Segment(a, b, " ".join(text[a:b].split()), False)
            for a, b in sentence_spans(text, s, e)]


def split_sentences(text: str) -> list[str]:
    """The texts of :func:`segments` (headings included, as sentences of their own)."""
    return [seg.text for seg in segments(text)]


def strip_citations(text: str) -> str:
    """``text`` without its citation markers."""
    return MARKER.sub("", text).strip()
