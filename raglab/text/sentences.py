"""Sentence splitting shared by the chunkers, the generators and the graders.

A sentence ends after ``. ! ? : ;`` (and any closing quote or bracket) followed by
whitespace, at a blank line, or before a list item (``-``, ``*``, ``•``, ``1.``, ``1)``).
"""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?:;])[\"')\]]*\s+|\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)")
_CITATION = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Sentence spans (trimmed) within text[start:end]."""
    end = len(text) if end is None else end
    out: list[tuple[int, int]] = []
    pos = start
    for m in _SENTENCE_END.finditer(text, start, end):
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


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, each with its whitespace collapsed."""
    return [" ".join(text[s:e].split()) for s, e in sentence_spans(text)]


def strip_citations(text: str) -> str:
    """``text`` without its ``[n]`` / ``[n, m]`` citation markers."""
    return _CITATION.sub("", text).strip()
