"""Text normalisation and quote location.

Gold evidence is a quote in a document, and a quote must survive re-extraction of the
document (other whitespace, hyphenation at line breaks, soft hyphens, ligatures, case,
punctuation). Both sides are normalised the same way:

1. Unicode NFKC (so the ligature "ﬁ" becomes "fi", full-width forms become ASCII) and
   case folding; soft hyphens (U+00AD) are removed;
2. a hyphen at a line break between two word characters is removed with the break
   ("pay-\\nment" becomes "payment"); a quote not found so is looked for again with such
   hyphens kept as word boundaries (a line that ends after "CN-" is not hyphenation),
   before any fuzzy match;
3. the text becomes its word tokens (``\\w+``) joined by single spaces, so every run of
   whitespace and punctuation is one boundary.

A quote is located exactly when its normalised form occurs in the normalised document on
token boundaries; otherwise a rapidfuzz partial alignment above a threshold (0-100) is
accepted. Either way the result carries character offsets into the original text.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

SOFT_HYPHEN = "\u00ad"
_HYPHENATION = re.compile(r"(?<=\w)[-\u2010\u2011]\s*\n\s*(?=\w)")
_WORD = re.compile(r"\w+")


def normalize(text: str, join_hyphens: bool = True) -> str:
    """Normalise text for matching (fast path, no offsets). ``join_hyphens=False`` keeps a
    hyphen at a line break as a word boundary ("CN-\\nfollowed": "cn followed")."""
    s = unicodedata.normalize("NFKC", text.replace(SOFT_HYPHEN, "")).casefold()
    if join_hyphens:
        s = _HYPHENATION.sub("", s)
    return " ".join(_WORD.findall(s))


@dataclass(frozen=True)
class NormalizedText:
    """A normalised text plus, for each normalised character, its index in the original."""

    text: str
    origin: tuple[int, ...]

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        """Map a normalised half-open range [start, end) to original offsets."""
        if end <= start:
            raise ValueError("empty range")
        return self.origin[start], self.origin[end - 1] + 1


def normalize_with_offsets(text: str, join_hyphens: bool = True) -> NormalizedText:
    """Normalise like :func:`normalize`, keeping the original offset of every character."""
    chars: list[str] = []
    origin: list[int] = []
    for i, c in enumerate(text):
        if c == SOFT_HYPHEN:
            continue
        out = c if c.isascii() else unicodedata.normalize("NFKC", c)
        for oc in out.casefold() if not c.isascii() else c.lower():
            chars.append(oc)
            origin.append(i)
    s = "".join(chars)
    # Remove hyphenation at line breaks, keeping the offset map aligned.
    keep = [True] * len(s)
    for m in _HYPHENATION.finditer(s) if join_hyphens else ():
        for j in range(m.start(), m.end()):
            keep[j] = False
    if not all(keep):
        s = "".join(c for c, k in zip(s, keep) if k)
        origin = [o for o, k in zip(origin, keep) if k]
    out_chars: list[str] = []
    out_origin: list[int] = []
    for m in _WORD.finditer(s):
        if out_chars:
            out_chars.append(" ")
            out_origin.append(origin[m.start()])
        out_chars.append(m.group())
        out_origin.extend(origin[m.start():m.end()])
    return NormalizedText("".join(out_chars), tuple(out_origin))


class Location(NamedTuple):
    """Where a quote was found: original character offsets and how."""

    start: int
    end: int
    method: str  # "exact" | "fuzzy" | "span"
    score: float  # 100 for exact


def _find_on_boundaries(needle: str, hay: str) -> int:
    """Index of ``needle`` in ``hay`` starting and ending on token boundaries, or -1."""
    padded = f" {hay} "
    i = padded.find(f" {needle} ")
    return -1 if i < 0 else i  # padded index i+1 maps to hay index i


def _on_boundaries(text: str, start: int, end: int) -> bool:
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    return not (before.isalnum() and text[start].isalnum()) and \
        not (after.isalnum() and text[end - 1].isalnum())


@lru_cache(maxsize=4096)
def _normalized_doc(text: str, join_hyphens: bool = True) -> NormalizedText:
    return normalize_with_offsets(text, join_hyphens)


def locate_quote(quote: str, document: str, fuzzy_threshold: float = 90.0) -> Location | None:
    """Locate ``quote`` in ``document``; ``None`` when it is not there.

    Exact (after normalisation, on token boundaries) first, then a rapidfuzz partial
    alignment scoring at least ``fuzzy_threshold``.
    """
    # Fast path: the quote verbatim, on word boundaries (what normalisation would find too).
    i = document.find(quote) if quote.strip() else -1
    if i >= 0 and _on_boundaries(document, i, i + len(quote)):
        return Location(i, i + len(quote), "exact", 100.0)
    q = normalize(quote)
    if not q:
        return None
    doc = _normalized_doc(document)
    i = _find_on_boundaries(q, doc.text)
    if i >= 0:
        start, end = doc.to_original(i, i + len(q))
        return Location(start, end, "exact", 100.0)
    if _HYPHENATION.search(document):  # a line that ends after a real hyphen ("CN-")
        kept = _normalized_doc(document, False)
        qk = normalize(quote, join_hyphens=False)
        i = _find_on_boundaries(qk, kept.text) if qk else -1
        if i >= 0:
            start, end = kept.to_original(i, i + len(qk))
            return Location(start, end, "exact", 100.0)
    if fuzzy_threshold > 100 or not doc.text:
        return None
    from rapidfuzz import fuzz

    al = fuzz.partial_ratio_alignment(q, doc.text, score_cutoff=fuzzy_threshold)
    if al is None or al.dest_end <= al.dest_start:
        return None
    ds, de = al.dest_start, al.dest_end
    ds, de = _refine_window(q, doc.text, ds, de)
    if de <= ds:
        return None
    start, end = doc.to_original(ds, de)
    return Location(start, end, "fuzzy", float(al.score))


def _refine_window(q: str, t: str, ds: int, de: int, slack: int = 3) -> tuple[int, int]:
    """Snap an alignment window to whole tokens, then move each edge by up to ``slack``
    tokens to the boundaries that best match the quote (rapidfuzz ratio)."""
    from rapidfuzz import fuzz

    bounds = [(m.start(), m.end()) for m in _WORD.finditer(t)]
    if not bounds:
        return ds, de
    first = next((i for i, (_, e) in enumerate(bounds) if e > ds), len(bounds) - 1)
    last = max(first, next((i for i in range(len(bounds) - 1, -1, -1) if bounds[i][0] < de), first))
    best = (-1.0, first, last)
    for i in range(max(0, first - slack), min(len(bounds), first + slack + 1)):
        for j in range(max(i, last - slack), min(len(bounds), last + slack + 1)):
            r = fuzz.ratio(q, t[bounds[i][0]:bounds[j][1]])
            if r > best[0]:
                best = (r, i, j)
    return bounds[best[1]][0], bounds[best[2]][1]


def contains_normalized(hay_normalized: str, needle_normalized: str) -> bool:
    """Token-boundary containment of two already-normalised strings."""
    return bool(needle_normalized) and f" {needle_normalized} " in f" {hay_normalized} "


WHITESPACE_TOKEN = re.compile(r"\S+")
_DIGITS = re.compile(r"(\d+)")


def natural_key(value: str) -> tuple:
    """A sort key that orders the numbers inside ``value`` by their value: turns 1, 2, 10
    (not 1, 10, 2), ``i9`` before ``i10``. Equal keys ("1" and "01") are left to the caller:
    sort by ``(natural_key(v), v)``."""
    return tuple(int(p) if i % 2 else p for i, p in enumerate(_DIGITS.split(value)))



def count_tokens(text: str) -> int:
    """Whitespace-separated tokens: the unit of chunk sizes, the context token budget and
    ``final.context_tokens``."""
    return len(text.split())  # str.split and \S+ use the same (Unicode) whitespace


# -- changed facts ---------------------------------------------------------------------------
# A fuzzy match tolerates damage to ordinary words (OCR, re-extraction), never a change of
# what the quote states: its numbers, negations and named entities must survive unchanged.
_NEGATIONS = frozenset("not no never cannot without none nor neither nothing nobody".split())
_CONTRACTED = frozenset("don doesn didn isn aren wasn weren can couldn won wouldn shouldn "
                        "hasn haven hadn mustn needn ain".split())  # + "t": don't, can't
_SENTENCE_END = frozenset(".!?:#\n")


def _fact_tokens(text: str) -> list[tuple[str, str | None]]:
    """The word tokens of ``text`` (lower case, as :func:`normalize` would give them) with
    what fact each states: ``"number"``, ``"negation"``, ``"entity"`` (a capitalised word
    that does not start a sentence) or None."""
    s = _HYPHENATION.sub("", unicodedata.normalize("NFKC", text.replace(SOFT_HYPHEN, "")))
    out: list[tuple[str, str | None]] = []
    for m in _WORD.finditer(s):
        w = m.group()
        low = w.casefold()
        before = s[:m.start()].rstrip()
        if any(c.isdigit() for c in w):
            kind: str | None = "number"
        elif low in _NEGATIONS or (low == "t" and out and out[-1][0] in _CONTRACTED):
            kind = "negation"
        elif w[0].isupper() and out and before and before[-1] not in _SENTENCE_END:
            kind = "entity"
        else:
            kind = None
        out.append((low, kind))
    return out


def fact_changes(quote: str, matched: str, entity_similarity: float = 80.0) -> list[str]:
    """How the numbers, negations and named entities of ``matched`` (the text a fuzzy match
    found) differ from those of ``quote``; empty when none changed.

    The two token sequences are aligned (rapidfuzz Levenshtein opcodes). A number or a
    negation that is dropped, added or replaced is a change; so is an entity replaced by a
    dissimilar word (an entity damaged by OCR, ``entity_similarity`` or more alike, is
    not). Extra words at the edges of the matched text are not part of the alignment.
    """
    from rapidfuzz import fuzz
    from rapidfuzz.distance import Levenshtein

    q, d = _fact_tokens(quote), _fact_tokens(matched)
    ops = [op for op in Levenshtein.opcodes([w for w, _ in q], [w for w, _ in d])
           if op.tag != "equal"]
    changes: list[str] = []
    for op in ops:
        qs, ds = q[op.src_start:op.src_end], d[op.dest_start:op.dest_end]
        at_edge = op.tag == "insert" and (op.dest_start == 0 or op.dest_end == len(d))
        if at_edge:
            continue
        for toks, other in ((qs, ds), (ds, qs)):
            for w, kind in toks:
                if kind is None:
                    continue
                if kind == "entity" and any(
                        fuzz.ratio(w, o) >= entity_similarity
                        for o in [*(o for o, _ in other), "".join(o for o, _ in other)]):
                    continue  # the same name, damaged (or split) by the extraction
                was, now = " ".join(o for o, _ in qs), " ".join(o for o, _ in ds)
                desc = (f"{kind} {was!r} -> {now!r}" if was and now else
                        f"{kind} {was!r} dropped" if was else f"{kind} {now!r} added")
                if desc not in changes:
                    changes.append(desc)
    return changes
