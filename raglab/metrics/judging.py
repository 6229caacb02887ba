"""Which retrieved hits hold which gold evidence items (deterministic judging, no models).

An evidence item of a ranked list is *found* at the first rank where the hits so far from
its document (the same ``doc_id``) together cover enough of it:
- a span item (``start``/``end``): any hit overlapping it by at least one character;
- a quote item (located in its document when the dataset was validated): the union of the
  hits' spans so far covers at least ``straddle_min_fraction`` of the quote's characters
  (1.0 means the whole quote). So a quote split over several chunks is found once enough of
  them are retrieved, whichever order they come in; for whole-document hits this is the
  first hit of the document, as in trec_eval.

A hit *holds* an item when it covers that fraction on its own, or when it is the hit at
which the item is found (it completes the union). A hit is relevant when it holds an item;
a later fragment of an item already found holds nothing.

A hit without offsets is placed in its document by its text (an exact find); a hit with no
text, or with the whole document's text, is the whole document. When its text cannot be
found in the document (a system that rewrote passages), a quote item is held when the
normalised quote occurs in the normalised hit text, or aligns with it at
``fuzzy_threshold`` or above; a span item is then matched through the span's text.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from raglab.text.normalize import contains_normalized, normalize


class GoldItem(NamedTuple):
    doc_id: str
    start: int
    end: int
    grade: float
    is_span: bool
    text: str  # the quote (or the span's text), used only when a hit cannot be placed


_doc_id = operator.itemgetter("doc_id")


def hit_span(hit: Mapping, doc_text: str | None) -> tuple[int, int] | None:
    """The character span of a hit in its document, or None when it cannot be placed."""
    s, e = hit.get("start"), hit.get("end")
    if s is not None and e is not None:
        return int(s), int(e)
    text = hit.get("text") or ""
    if doc_text is None:
        return None
    if not text or text == doc_text:
        return 0, len(doc_text)
    i = doc_text.find(text)
    if i >= 0:
        return i, i + len(text)
    return None


def judge_hits(hits: Sequence[Mapping], gold: Sequence[GoldItem],
               doc_texts: Mapping[str, str], straddle_min_fraction: float = 0.5,
               fuzzy_threshold: float = 90.0) -> list[list[int]]:
    """For each hit, the indexes of the gold items it holds (ascending; an empty tuple when
    it holds none), in one pass down the ranked list."""
    by_doc: dict[str, list[int]] = {}
    for i, g in enumerate(gold):
        by_doc.setdefault(g.doc_id, []).append(i)
    out: list = [()] * len(hits)  # shared empty tuple for hits holding nothing
    found: set[int] = set()
    parts: dict[int, list[tuple[int, int]]] = {}  # pieces of a quote not yet found
    # Only hits from a gold document can hold evidence: visit just those.
    for r in list(itertools.compress(range(len(hits)), map(by_doc.__contains__,
                                                          map(_doc_id, hits)))):
        hit = hits[r]
        idx = by_doc[hit["doc_id"]]
        s, e = hit.get("start"), hit.get("end")
        span = (s, e) if s is not None and e is not None else \
            hit_span(hit, doc_texts.get(hit["doc_id"]))
        held: list[int] = []
        out[r] = held
        hit_norm: str | None = None
        for i in idx:
            g = gold[i]
            if span is not None:
                lo, hi = max(span[0], g.start), min(span[1], g.end)
                if hi <= lo:
                    continue
                if g.is_span:
                    held.append(i)
                    found.add(i)
                    continue
                need = max(1, math.ceil(straddle_min_fraction * (g.end - g.start)))
                if hi - lo >= need:
                    held.append(i)
                    found.add(i)
                elif i not in found:
                    pieces = parts.setdefault(i, [])
                    pieces.append((lo, hi))
                    if _covered(pieces) >= need:
                        held.append(i)
                        found.add(i)
                        del parts[i]
            else:
                if hit_norm is None:
                    hit_norm = normalize(hit.get("text") or "")
                if _text_holds(hit_norm, g.text, fuzzy_threshold):
                    held.append(i)
                    found.add(i)
    return out


def _covered(pieces: list[tuple[int, int]]) -> int:
    """Characters covered by the union of half-open intervals."""
    total, end = 0, None
    for lo, hi in sorted(pieces):
        if end is None or lo >= end:
            total += hi - lo
            end = hi
        elif hi > end:
            total += hi - end
            end = hi
    return total


def _text_holds(hit_norm: str, quote: str, threshold: float) -> bool:
    q = normalize(quote)
    if contains_normalized(hit_norm, q):
        return True
    if not q or not hit_norm or threshold > 100:
        return False
    from rapidfuzz import fuzz

    return fuzz.partial_ratio(q, hit_norm, score_cutoff=threshold) > 0
