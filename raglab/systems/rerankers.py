"""Rerankers: reorder the candidates before the final context is cut to ``k``."""

from __future__ import annotations

from collections.abc import Callable

from raglab.text.lexical import content_terms, coverage

Scored = list[tuple[int, float, str]]  # (candidate position, score, text)


def rerank_none(question: str, cands: Scored, cfg) -> Scored:
    return list(cands)


def rerank_lexical(question: str, cands: Scored, cfg) -> Scored:
    """Blend of the retrieval score (scaled to 0-1) and query-term coverage."""
    if not cands:
        return []
    q = set(content_terms(question))
    top = max(s for _, s, _ in cands) or 1.0
    rescored = [(i, cfg.weight * (s / top) + (1 - cfg.weight) * coverage(q, t), t)
                for i, s, t in cands]
    return sorted(rescored, key=lambda r: (-r[1], r[0]))


def rerank_dense(question: str, cands: Scored, cfg) -> Scored:
    if not cands:
        return []
    from raglab.systems.embeddings import embed

    vecs = embed([question] + [t for _, _, t in cands], cfg.model)
    sims = vecs[1:] @ vecs[0]
    rescored = [(i, float(sim), t) for (i, _, t), sim in zip(cands, sims)]
    return sorted(rescored, key=lambda r: (-r[1], r[0]))


RERANKERS: dict[str, Callable[[str, Scored, object], Scored]] = {
    "none": rerank_none,
    "lexical": rerank_lexical,
    "dense": rerank_dense,
}
