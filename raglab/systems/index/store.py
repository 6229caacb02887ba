"""Chunk indexes, built once per corpus x chunker x embedder and cached on disk; retrieval
honours the case's metadata filters and, optionally, its user's ACL.

An index kind (``embedder`` group, one module each beside this one) is a
:class:`raglab.components.Embedder` registered with :func:`raglab.registry.register`::

    build(self, path, texts) -> None  # write its artifacts into ``path``
    load(self, path) -> index         # read them back; the index has
    rank(self, query, mask) -> (scores, keep)  # one score per chunk, and which of the
                                               # allowed chunks (``mask``) it returns
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from raglab.cache import StageCache, content_key
from raglab.data.schema import Document, User, matches_filters, may_see
from raglab.registry import build
from raglab.systems.chunkers import Chunk, chunk_document

INDEX_VERSION = 1

if TYPE_CHECKING:
    import numpy as np


@dataclass
class ChunkIndex:
    key: str
    chunks: list[Chunk]
    doc_index: np.ndarray  # chunk -> position of its document in ``doc_ids``
    doc_ids: list[str]
    embedder: Any
    kind: Any = None  # the loaded index kind (bm25, dense, hybrid, ...)

    def allowed_mask(self, docs: dict[str, Document], filters: dict[str, Any],
                     user: User | None, enforce_acl: bool) -> np.ndarray:
        import numpy as np

        ok = np.array([matches_filters(docs[d].metadata, filters)
                       and (not enforce_acl or may_see(docs[d].acl, user))
                       for d in self.doc_ids], dtype=bool)
        return ok[self.doc_index]

    def search(self, query: str, mask: np.ndarray, depth: int) -> list[tuple[int, float]]:
        """Top ``depth`` allowed chunks as ``(chunk index, score)``, best first. Ties keep
        index order."""
        scores, keep = self.kind.rank(query, mask)
        order = ranked(scores, keep)[:depth]
        return [(int(i), float(scores[i])) for i in order]


def ranked(scores: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Indexes of the kept entries, best score first (a stable sort: ties keep index order)."""
    import numpy as np

    idx = np.flatnonzero(keep)
    return idx[np.argsort(-scores[idx], kind="stable")]


def index_key(corpus_hash: str, chunker: Any, embedder: Any) -> str:
    return content_key("index", INDEX_VERSION, corpus_hash, chunker.model_dump(),
                       embedder.model_dump())


def build_or_load_index(docs: dict[str, Document], corpus_hash: str, chunker: Any, embedder: Any,
                        cache: StageCache, work: Any) -> ChunkIndex:
    """The index for this corpus, chunker and embedder: from the cache, or built once."""
    kind = build("embedder", embedder)
    key = index_key(corpus_hash, chunker, embedder)
    with cache.directory("index", key) as (path, complete):
        if complete:
            return _load(path, key, docs, embedder, kind)
        doc_ids = list(docs)
        chunks: list[Chunk] = []
        doc_index: list[int] = []
        for di, doc_id in enumerate(doc_ids):
            for ch in chunk_document(doc_id, docs[doc_id].text, chunker):
                chunks.append(ch)
                doc_index.append(di)
        texts = [(f"{title}\n" if (title := docs[c.doc_id].title) else "") + c.text
                 for c in chunks]
        with open(path / "chunks.jsonl", "w", encoding="utf-8") as fh:
            for c in chunks:
                fh.write(json.dumps({"doc_id": c.doc_id, "start": c.start, "end": c.end}) + "\n")
        kind.build(path, texts)
        work.add("index_builds")
    return _load(path, key, docs, embedder, kind)


def _load(path, key: str, docs: dict[str, Document], embedder: Any, kind: Any) -> ChunkIndex:
    import numpy as np

    doc_ids = list(docs)
    pos = {d: i for i, d in enumerate(doc_ids)}
    chunks, doc_index = [], []
    with open(path / "chunks.jsonl", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            text = docs[r["doc_id"]].text
            chunks.append(Chunk(r["doc_id"], r["start"], r["end"], text[r["start"]:r["end"]]))
            doc_index.append(pos[r["doc_id"]])
    return ChunkIndex(key, chunks, np.asarray(doc_index, dtype=np.int64), doc_ids, embedder,
                      kind.load(path))
