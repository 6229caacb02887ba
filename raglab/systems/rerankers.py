"""Rerankers (``reranker`` group): reorder the candidates before the final context is cut
to ``k``. A reranker is made from its config section and has
``rerank(question, candidates) -> candidates`` over ``(position, score, text)`` triples."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from raglab.components import Reranker
from raglab.data.schema import Strict
from raglab.registry import register
from raglab.text.lexical import content_terms, coverage

Scored = list[tuple[int, float, str]]  # (candidate position, score, text)


class NoRerankCfg(Strict):
    name: Literal["none"]


class LexicalRerankCfg(Strict):
    name: Literal["lexical"]
    weight: float = Field(0.5, ge=0, le=1)


class DenseRerankCfg(Strict):
    name: Literal["dense"]
    model: str = "all-MiniLM-L6-v2"


@register("reranker", "none", config=NoRerankCfg)
class NoReranker(Reranker):
    """The retrieval order, unchanged."""

    def rerank(self, question: str, cands: Scored) -> Scored:
        return list(cands)


@register("reranker", "lexical", config=LexicalRerankCfg)
class LexicalReranker(Reranker):
    """``weight`` x the retrieval score (scaled to 0-1 by the top score) plus
    ``1 - weight`` x the share of the question's content terms the candidate holds."""

    def rerank(self, question: str, cands: Scored) -> Scored:
        if not cands:
            return []
        w = self.cfg.weight
        q = set(content_terms(question))
        top = max(s for _, s, _ in cands) or 1.0
        rescored = [(i, w * (s / top) + (1 - w) * coverage(q, t), t) for i, s, t in cands]
        return sorted(rescored, key=lambda r: (-r[1], r[0]))


@register("reranker", "dense", config=DenseRerankCfg)
class DenseReranker(Reranker):
    """Cosine similarity of question and candidate embeddings (optional extra)."""

    @classmethod
    def preflight(cls, run_cfg) -> None:
        from raglab.systems.embeddings import check_available

        check_available()

    def rerank(self, question: str, cands: Scored) -> Scored:
        if not cands:
            return []
        from raglab.systems.embeddings import embed

        vecs = embed([question] + [t for _, _, t in cands], self.cfg.model)
        sims = vecs[1:] @ vecs[0]
        rescored = [(i, float(sim), t) for (i, _, t), sim in zip(cands, sims)]
        return sorted(rescored, key=lambda r: (-r[1], r[0]))
