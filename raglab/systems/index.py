"""Chunk indexes (bm25, dense, hybrid), built once per corpus x chunker x embedder and
cached on disk; retrieval honours the case's metadata filters and, optionally, its user's ACL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from raglab.data.schema import Document, User, matches_filters, may_see
from raglab.cache import StageCache, content_key
from raglab.systems.chunkers import Chunk, chunk_document

INDEX_VERSION = 1


def _tokenize(texts: list[str]) -> list[list[str]]:
    import bm25s

    return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)


@dataclass
class ChunkIndex:
    key: str
    chunks: list[Chunk]
    doc_index: np.ndarray  # chunk -> position of its document in ``doc_ids``
    doc_ids: list[str]
    embedder: Any
    bm25: Any = None
    vectors: np.ndarray | None = None

    def allowed_mask(self, docs: dict[str, Document], filters: dict[str, Any],
                     user: User | None, enforce_acl: bool) -> np.ndarray:
        ok = np.array([matches_filters(docs[d].metadata, filters)
                       and (not enforce_acl or may_see(docs[d].acl, user))
                       for d in self.doc_ids], dtype=bool)
        return ok[self.doc_index]

    def _bm25_scores(self, query: str) -> np.ndarray:
        toks = [t for t in _tokenize([query])[0] if t in self.bm25.vocab_dict]
        if not toks:
            return np.zeros(len(self.chunks), dtype=np.float32)
        return np.asarray(self.bm25.get_scores(toks), dtype=np.float32)

    def _dense_scores(self, query: str) -> np.ndarray:
        from raglab.systems.embeddings import embed

        q = embed([query], self.embedder.model, self.embedder.batch_size)[0]
        return self.vectors @ q

    def search(self, query: str, mask: np.ndarray, depth: int) -> list[tuple[int, float]]:
        """Top ``depth`` allowed chunks as ``(chunk index, score)``, best first.

        Chunks scoring 0 under bm25 (no query term) are not returned. Ties keep index order.
        """
        name = self.embedder.name
        if name == "bm25":
            scores = self._bm25_scores(query)
            keep = mask & (scores > 0)
        elif name == "dense":
            scores = self._dense_scores(query)
            keep = mask
        else:  # hybrid: reciprocal rank fusion over the allowed chunks
            keep = mask
            scores = np.zeros(len(self.chunks), dtype=np.float64)
            for s in (self._bm25_scores(query), self._dense_scores(query)):
                order = _ranked(s, keep)
                ranks = np.empty(len(order), dtype=np.float64)
                ranks[:] = np.arange(1, len(order) + 1)
                scores[order] += 1.0 / (self.embedder.rrf_k + ranks)
        order = _ranked(scores, keep)[:depth]
        return [(int(i), float(scores[i])) for i in order]


def _ranked(scores: np.ndarray, keep: np.ndarray) -> np.ndarray:
    idx = np.flatnonzero(keep)
    # stable sort on -score keeps index order among ties
    return idx[np.argsort(-scores[idx], kind="stable")]


def index_key(corpus_hash: str, chunker: Any, embedder: Any) -> str:
    return content_key("index", INDEX_VERSION, corpus_hash, chunker.model_dump(),
                       embedder.model_dump())


def build_or_load_index(docs: dict[str, Document], corpus_hash: str, chunker: Any, embedder: Any,
                        cache: StageCache, work: Any) -> ChunkIndex:
    """The index for this corpus, chunker and embedder: from the cache, or built once."""
    key = index_key(corpus_hash, chunker, embedder)
    with cache.directory("index", key) as (path, complete):
        if complete:
            return _load(path, key, docs, embedder)
        doc_ids = list(docs)
        chunks: list[Chunk] = []
        doc_index: list[int] = []
        for di, doc_id in enumerate(doc_ids):
            for ch in chunk_document(doc_id, docs[doc_id].text, chunker):
                chunks.append(ch)
                doc_index.append(di)
        texts = [(docs[c.doc_id].title + "\n" if docs[c.doc_id].title else "") + c.text
                 for c in chunks]
        with open(path / "chunks.jsonl", "w", encoding="utf-8") as fh:
            for c, di in zip(chunks, doc_index):
                fh.write(json.dumps({"doc_id": c.doc_id, "start": c.start, "end": c.end}) + "\n")
        if embedder.name in ("bm25", "hybrid"):
            import bm25s

            bm = bm25s.BM25(k1=embedder.k1, b=embedder.b)
            bm.index(bm25s.tokenize(texts, stopwords="en", show_progress=False),
                     show_progress=False)
            bm.save(str(path / "bm25"), show_progress=False)
        if embedder.name in ("dense", "hybrid"):
            from raglab.systems.embeddings import embed

            np.save(path / "vectors.npy", embed(texts, embedder.model, embedder.batch_size))
        work.add("index_builds")
    return _load(path, key, docs, embedder)


def _load(path, key: str, docs: dict[str, Document], embedder: Any) -> ChunkIndex:
    doc_ids = list(docs)
    pos = {d: i for i, d in enumerate(doc_ids)}
    chunks, doc_index = [], []
    with open(path / "chunks.jsonl", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            text = docs[r["doc_id"]].text
            chunks.append(Chunk(r["doc_id"], r["start"], r["end"], text[r["start"]:r["end"]]))
            doc_index.append(pos[r["doc_id"]])
    idx = ChunkIndex(key, chunks, np.asarray(doc_index, dtype=np.int64), doc_ids, embedder)
    if embedder.name in ("bm25", "hybrid"):
        import bm25s

        idx.bm25 = bm25s.BM25.load(str(path / "bm25"), show_progress=False)
    if embedder.name in ("dense", "hybrid"):
        idx.vectors = np.load(path / "vectors.npy")
    return idx
