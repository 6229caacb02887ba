"""Chunkers: split a document into chunks that keep ``doc_id`` and character offsets.

Tokens are whitespace-separated words (raglab.text.normalize.count_tokens).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from raglab.components import Chunker
from raglab.data.schema import Strict
from raglab.registry import build, register
from raglab.text.normalize import WHITESPACE_TOKEN
from raglab.text.sentences import append_trimmed, sentence_spans


class _ChunkerBase(Strict):
    size: int = Field(256, gt=0, description="word tokens per chunk, at most")
    overlap: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _overlap_below_size(self):
        if self.overlap >= self.size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        return self


class FixedChunkerCfg(_ChunkerBase):
    name: Literal["fixed"]
    overlap: int = Field(32, ge=0, description="word tokens shared by neighbouring windows")


class SentenceChunkerCfg(_ChunkerBase):
    name: Literal["sentence"]
    size: int = Field(5, gt=0, description="sentences per window")
    overlap: int = Field(1, ge=0, description="sentences shared by neighbouring windows")


class RecursiveChunkerCfg(_ChunkerBase):
    name: Literal["recursive"]


@dataclass(frozen=True)
class Chunk:
    doc_id: str
    start: int
    end: int
    text: str


def token_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    end = len(text) if end is None else end
    return [(start + m.start(), start + m.end())
            for m in WHITESPACE_TOKEN.finditer(text[start:end])]


def _windows(spans: list[tuple[int, int]], size: int, overlap: int) -> Iterable[tuple[int, int]]:
    if not spans:
        return
    step = size - overlap
    i = 0
    while True:
        window = spans[i:i + size]
        yield window[0][0], window[-1][1]
        if i + size >= len(spans):
            break
        i += step


def chunk_fixed(doc_id: str, text: str, cfg: FixedChunkerCfg) -> list[Chunk]:
    return [Chunk(doc_id, s, e, text[s:e])
            for s, e in _windows(token_spans(text), cfg.size, cfg.overlap)]


def chunk_sentence(doc_id: str, text: str, cfg: SentenceChunkerCfg) -> list[Chunk]:
    return [Chunk(doc_id, s, e, text[s:e])
            for s, e in _windows(sentence_spans(text), cfg.size, cfg.overlap)]


def _sections(text: str) -> list[tuple[int, int]]:
    """Split at markdown headings ('# ...' lines); each section starts with its heading."""
    starts = [m.start() for m in re.finditer(r"^#{1,6}\s", text, re.M)]
    if not starts or starts[0] != 0:
        starts = [0, *starts]
    bounds = [*starts, len(text)]
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)
            if text[bounds[i]:bounds[i + 1]].strip()]


def _paragraphs(text: str, s: int, e: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pos = s
    for m in re.finditer(r"\n\s*\n", text[s:e]):
        append_trimmed(text, pos, s + m.start(), out)
        pos = s + m.end()
    append_trimmed(text, pos, e, out)
    return out


def _split_to_size(text: str, span: tuple[int, int], size: int,
                   level: int) -> list[tuple[int, int]]:
    s, e = span
    n = len(token_spans(text, s, e))
    if n <= size:
        return [span]
    if level == 0:
        pieces = _paragraphs(text, s, e)
    elif level == 1:
        pieces = sentence_spans(text, s, e)
    else:
        return list(_windows(token_spans(text, s, e), size, 0))
    if len(pieces) <= 1:
        return _split_to_size(text, span, size, level + 1)
    out: list[tuple[int, int]] = []
    for p in pieces:
        out.extend(_split_to_size(text, p, size, level + 1))
    return out


def _is_heading(s: str) -> bool:
    return s.lstrip().startswith("#") and "\n" not in s.strip()


def chunk_recursive(doc_id: str, text: str, cfg: RecursiveChunkerCfg) -> list[Chunk]:
    chunks: list[Chunk] = []
    for section in _sections(text):
        pieces = _split_to_size(text, section, cfg.size, 0)
        # merge neighbouring pieces of the section up to the size
        merged: list[tuple[int, int]] = []
        cur: tuple[int, int] | None = None
        cur_tokens = 0
        for p in pieces:
            n = len(token_spans(text, *p))
            heading_only = cur is not None and _is_heading(text[cur[0]:cur[1]])
            if cur is not None and (cur_tokens + n <= cfg.size or heading_only):
                cur = (cur[0], p[1])
                cur_tokens += n
            else:
                if cur is not None:
                    merged.append(cur)
                cur, cur_tokens = p, n
        if cur is not None:
            merged.append(cur)
        for s, e in merged:
            if cfg.overlap and chunks and chunks[-1].doc_id == doc_id and s > section[0]:
                prev = token_spans(text, section[0], s)[-cfg.overlap:]
                if prev:
                    s = prev[0][0]
            chunks.append(Chunk(doc_id, s, e, text[s:e]))
    return chunks


@register("chunker", "fixed", config=FixedChunkerCfg)
class FixedChunker(Chunker):
    """Windows of ``size`` whitespace tokens, ``overlap`` tokens shared by neighbours."""

    def chunk(self, doc_id: str, text: str) -> list[Chunk]:
        return chunk_fixed(doc_id, text, self.cfg)


@register("chunker", "sentence", config=SentenceChunkerCfg)
class SentenceChunker(Chunker):
    """Windows of ``size`` sentences, ``overlap`` sentences shared by neighbours."""

    def chunk(self, doc_id: str, text: str) -> list[Chunk]:
        return chunk_sentence(doc_id, text, self.cfg)


@register("chunker", "recursive", config=RecursiveChunkerCfg)
class RecursiveChunker(Chunker):
    """Markdown sections, split by paragraph, sentence, then tokens down to ``size`` tokens,
    neighbouring pieces merged up to it; a heading stays with its section."""

    def chunk(self, doc_id: str, text: str) -> list[Chunk]:
        return chunk_recursive(doc_id, text, self.cfg)


def chunk_document(doc_id: str, text: str, cfg) -> list[Chunk]:
    """The chunks of one document under the chunker chosen by ``cfg.name``."""
    return build("chunker", cfg).chunk(doc_id, text)
