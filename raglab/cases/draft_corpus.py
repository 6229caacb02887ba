"""What ``raglab cases draft`` shows a model and how it reads the answer back (pure).

- :func:`shown` numbers a document's sentences (headings are shown, unnumbered); the model
  answers with sentence numbers and :func:`quotes_of` turns them into quotes copied from
  the document with their offsets, so evidence is verbatim by construction. A number the
  model invented is :class:`Unplaceable`.
- :func:`units` finds, for each kind of case, the documents (or pairs of documents) of the
  corpus that can give one; :func:`sample` picks among them stratified by metadata.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from raglab.data.schema import Document, User, may_see
from raglab.text.lexical import content_terms
from raglab.text.normalize import normalize
from raglab.text.sentences import segments

#: the kinds of case, in the order they are planned and reported
KINDS = ("lookup", "cross_section", "unanswerable", "acl_restricted", "withdrawn_policy",
         "near_duplicate", "counter_common_knowledge")
#: kinds whose draft is unanswerable (no nuggets)
UNANSWERABLE = ("unanswerable", "acl_restricted")


class Unplaceable(ValueError):
    """The model's evidence cannot be placed in its document."""


@dataclass(frozen=True)
class Sentence:
    number: int  # 1-based, over every document shown in one request
    doc_id: str
    start: int
    end: int
    section: int  # headings seen before it in its document


@dataclass
class Shown:
    """The documents of one request, their sentences numbered."""

    docs: list[Document]
    sentences: dict[int, Sentence] = field(default_factory=dict)
    text: str = ""


def shown(docs: list[Document], max_chars: int, rng: random.Random | None = None) -> Shown:
    """The documents as the model sees them: ``Document A (doc_id): title`` then each heading
    as is and each sentence as ``[n] text``. A document longer than ``max_chars`` is shown
    as a window of whole sentences (a section) starting at a heading or sentence chosen
    by ``rng`` (the first one without it)."""
    out = Shown(list(docs))
    blocks = []
    n = 0
    for i, doc in enumerate(docs):
        segs = segments(doc.text)
        first = 0
        if sum(s.end - s.start for s in segs) > max_chars and rng is not None and segs:
            starts = [j for j, s in enumerate(segs) if s.heading] or list(range(len(segs)))
            first = rng.choice(starts)
        lines = [f"Document {chr(65 + i)} ({doc.doc_id}): {doc.title or ''}".rstrip()]
        section = sum(1 for s in segs[:first] if s.heading)
        used = mine = 0
        for seg in segs[first:]:
            used += seg.end - seg.start
            if used > max_chars and mine > 0:
                break
            if seg.heading:
                section += 1
                lines.append(f"## {seg.text}")
                continue
            n += 1
            mine += 1
            out.sentences[n] = Sentence(n, doc.doc_id, seg.start, seg.end, section)
            lines.append(f"[{n}] {seg.text}")
        blocks.append("\n".join(lines))
    out.text = "\n\n".join(blocks)
    return out


def quotes_of(view: Shown, numbers: Iterable[int], doc_ids: Iterable[str] | None = None
              ) -> list[dict]:
    """Evidence items (``doc_id``, ``quote``, ``start``, ``end``) of the sentence numbers:
    consecutive sentences of one section become one quote, copied from the document.
    Raises :class:`Unplaceable` for a number that was not shown or a sentence outside
    ``doc_ids`` (when given)."""
    nums = sorted({int(x) for x in numbers})
    if not nums:
        raise Unplaceable("no sentence number given")
    allowed = set(doc_ids) if doc_ids is not None else None
    texts = {d.doc_id: d.text for d in view.docs}
    runs: list[list[Sentence]] = []
    for num in nums:
        s = view.sentences.get(num)
        if s is None:
            raise Unplaceable(f"sentence {num} was not shown (1-{len(view.sentences)})")
        if allowed is not None and s.doc_id not in allowed:
            raise Unplaceable(f"sentence {num} is not in {', '.join(sorted(allowed))}")
        last = runs[-1][-1] if runs else None
        if (last is not None and last.number == num - 1 and last.doc_id == s.doc_id
                and last.section == s.section):
            runs[-1].append(s)
        else:
            runs.append([s])
    out = []
    for run in runs:
        a, b = run[0].start, run[-1].end
        out.append({"doc_id": run[0].doc_id, "quote": texts[run[0].doc_id][a:b],
                    "start": a, "end": b, "grade": 1})
    return out


def sections_of(view: Shown, numbers: Iterable[int]) -> set[tuple[str, int]]:
    """The (document, section) pairs the sentence numbers fall in (unknown ones left out)."""
    return {(view.sentences[n].doc_id, view.sentences[n].section) for n in numbers
            if n in view.sentences}


# -- what each kind needs of the corpus ---------------------------------------------------

@dataclass(frozen=True)
class Unit:
    """What one draft of a kind is made from: its documents, the first the main one (the
    one the case is about; for a twin or a superseded pair, the one holding the answer)."""

    kind: str
    docs: tuple[Document, ...]

    @property
    def main(self) -> Document:
        return self.docs[0]


_DIGITS = re.compile(r"\d+")


def _family(doc: Document) -> str:
    """A document's id without its numbers: versions and dates of one text share it."""
    return _DIGITS.sub("#", doc.doc_id)


def _version(doc: Document) -> tuple[int, ...]:
    return tuple(int(x) for x in _DIGITS.findall(doc.doc_id))


def _same_meta(a: Document, b: Document) -> bool:
    return a.metadata == b.metadata


def _sections(doc: Document) -> int:
    """Sections with at least one sentence (text before the first heading counts as one)."""
    seen: set[int] = set()
    section = 0
    for seg in segments(doc.text):
        if seg.heading:
            section += 1
        else:
            seen.add(section)
    return len(seen)


def _has_sentences(doc: Document) -> bool:
    return any(not s.heading for s in segments(doc.text))


def superseded_pairs(corpus: list[Document]) -> list[tuple[Document, Document]]:
    """``(newer, older)`` pairs: documents whose ids differ only in their numbers (dates,
    versions) and whose metadata agree, each with the one just before it."""
    fams: dict[tuple, list[Document]] = defaultdict(list)
    for d in corpus:
        if _DIGITS.search(d.doc_id):
            fams[(_family(d), tuple(sorted((k, str(v)) for k, v in d.metadata.items())))] \
                .append(d)
    out = []
    for docs in fams.values():
        docs.sort(key=_version)
        out += [(docs[i + 1], docs[i]) for i in range(len(docs) - 1)]
    return out


def twin_pairs(corpus: list[Document], similarity: float) -> list[tuple[Document, Document]]:
    """Near-duplicate documents (rapidfuzz ratio of their texts at least ``similarity``)
    whose metadata differ (a region or tier twin), each pair both ways round. Only pairs
    whose hashed bags of words are close (cosine at least 0.8, or similarity/100 when that
    is lower) are compared character by character: a thousand documents take seconds."""
    import zlib

    import numpy as np
    from rapidfuzz import fuzz

    dims = 4096
    bags = np.zeros((len(corpus), dims), dtype=np.float32)
    for i, d in enumerate(corpus):
        for w in normalize(d.text).split():
            bags[i, zlib.crc32(w.encode("utf-8")) % dims] += 1.0
    bags /= np.maximum(np.linalg.norm(bags, axis=1, keepdims=True), 1e-9)
    out = []
    for lo in range(0, len(corpus), 512):
        block = bags[lo:lo + 512] @ bags.T
        for i, j in zip(*np.nonzero(block >= min(0.8, similarity / 100)), strict=True):
            i = int(i) + lo
            j = int(j)
            if j <= i:
                continue
            a, b = corpus[i], corpus[j]
            if _same_meta(a, b) or _family(a) == _family(b) and _version(a) != _version(b):
                continue
            la, lb = len(a.text), len(b.text)
            if min(la, lb) < similarity / 100 * max(la, lb):
                continue
            if fuzz.ratio(a.text, b.text, score_cutoff=similarity):
                out += [(a, b), (b, a)]
    return out


def units(corpus: list[Document], twin_similarity: float) -> tuple[dict[str, list[Unit]],
                                                                 dict[str, str]]:
    """``({kind: units}, {kind: why the corpus has none})``."""
    texts = [d for d in corpus if _has_sentences(d)]
    out: dict[str, list[Unit]] = {k: [] for k in KINDS}
    for d in texts:
        out["lookup"].append(Unit("lookup", (d,)))
        out["unanswerable"].append(Unit("unanswerable", (d,)))
        out["counter_common_knowledge"].append(Unit("counter_common_knowledge", (d,)))
        if _sections(d) >= 2:
            out["cross_section"].append(Unit("cross_section", (d,)))
        if d.acl is not None:
            out["acl_restricted"].append(Unit("acl_restricted", (d,)))
    by_meta: dict[tuple, list[Document]] = defaultdict(list)
    for d in texts:
        if d.acl is None:
            by_meta[tuple(sorted((k, str(v)) for k, v in d.metadata.items()))].append(d)
    for group in by_meta.values():  # answers across two documents of the same metadata
        out["cross_section"] += [Unit("cross_section", (a, b))
                                 for a, b in zip(group, group[1:], strict=False)]
    out["withdrawn_policy"] = [Unit("withdrawn_policy", p) for p in superseded_pairs(texts)]
    out["near_duplicate"] = [Unit("near_duplicate", p) for p in twin_pairs(texts, twin_similarity)]
    why = {
        "lookup": "no document has a sentence",
        "unanswerable": "no document has a sentence",
        "counter_common_knowledge": "no document has a sentence",
        "cross_section": ("no document has two sections and no two documents share their "
                          "metadata"),
        "acl_restricted": "no document has an acl",
        "withdrawn_policy": ("no two documents differ only in the numbers of their ids "
                             "(dated or versioned documents with the same metadata)"),
        "near_duplicate": (f"no two documents with different metadata are near duplicates "
                           f"(text similarity >= {twin_similarity:g})"),
    }
    return out, {k: why[k] for k in KINDS if not out[k]}


def allocate(n: int, shares: dict[str, float]) -> dict[str, int]:
    """``n`` drafts over the kinds in proportion to ``shares`` (largest remainder; ties in
    :data:`KINDS` order); when ``n`` allows, every kind with a share gets at least one
    (taken from the kind with the most)."""
    total = sum(shares.values())
    if n <= 0 or total <= 0:
        return dict.fromkeys(shares, 0)
    exact = {k: n * v / total for k, v in shares.items()}
    out = {k: int(x) for k, x in exact.items()}
    rest = sorted(shares, key=lambda k: (-(exact[k] - out[k]), KINDS.index(k)))
    for k in rest[: n - sum(out.values())]:
        out[k] += 1
    if n >= sum(1 for v in shares.values() if v > 0):
        for k in [k for k, v in shares.items() if v > 0 and out[k] == 0]:
            out[max(out, key=lambda j: (out[j], -KINDS.index(j)))] -= 1
            out[k] = 1
    return out


def sample(pool: list[Unit], k: int, stratify: list[str], rng: random.Random) -> list[Unit]:
    """``k`` units (at most the pool), stratified: units are grouped by the main document's
    values of the ``stratify`` metadata keys and the groups taken in turn."""
    strata: dict[tuple, list[Unit]] = defaultdict(list)
    for u in pool:
        strata[tuple(str(u.main.metadata.get(key)) for key in stratify)].append(u)
    keys = sorted(strata)
    rng.shuffle(keys)
    for key in keys:
        rng.shuffle(strata[key])
    out: list[Unit] = []
    while len(out) < k and any(strata[key] for key in keys):
        for key in keys:
            if strata[key] and len(out) < k:
                out.append(strata[key].pop())
    return out


def outsider(corpus: list[Document], doc: Document) -> User:
    """A user whose groups exclude the document's ACL (the groups of the corpus's other
    ACLs, else ``customer``): this user may not see ``doc``."""
    acl = set(doc.acl or [])
    groups = sorted({g for d in corpus for g in (d.acl or [])} - acl) or ["customer"]
    if "customer" not in acl and "customer" not in groups:
        groups = ["customer", *groups]
    groups = [g for g in groups if g not in acl] or [f"not-{'-'.join(sorted(acl))}"]
    user = User(id="drafted-outsider", groups=groups[:3])
    assert not may_see(doc.acl, user)
    return user


def insider(doc: Document) -> User | None:
    """A user who may see ``doc`` (None for a document everyone may see)."""
    if doc.acl is None:
        return None
    return User(id="drafted-member", groups=[sorted(doc.acl)[0]])


def vocabulary_share(question: str, documents: Iterable[str]) -> float | None:
    """The share of the question's content words (stemmed, stopwords out) that appear in
    the documents' texts (None: the question has none)."""
    terms = set(content_terms(question))
    if not terms:
        return None
    seen: set[str] = set()
    for text in documents:
        seen |= set(content_terms(text))
    return len(terms & seen) / len(terms)
