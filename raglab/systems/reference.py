"""The reference RAG pipeline: chunker -> index -> filters/ACL -> reranker -> context -> generator.

Every stage result is reused through the stage cache: the index per corpus, chunker and
embedder; candidates per index, query, filters, visibility and depth; the answer per
context, prompt and generator.
"""

from __future__ import annotations

import time
from typing import Any

from raglab.config import RunCfg
from raglab.data.dataset import Dataset
from raglab.data.schema import SystemOutput
from raglab.cache import StageCache, content_key
from raglab.systems.base import SystemRequest, WorkCounter
from raglab.text.normalize import count_tokens
from raglab.systems.generators import generate_anthropic, generate_extractive
from raglab.systems.index import build_or_load_index
from raglab.systems.rerankers import RERANKERS

GENERATION_VERSION = 2  # 2: headings never glued to answers; citations from the shared split


class ReferenceSystem:
    def __init__(self, cfg: RunCfg, dataset: Dataset, cache: StageCache, work: WorkCounter,
                 llm: Any = None):
        self.cfg = cfg
        self.docs = dataset.corpus
        self.cache = cache
        self.work = work
        self.llm = llm
        self.enforce_acl = cfg.system.enforce_acl
        self.index = build_or_load_index(dataset.corpus, dataset.corpus_hash, cfg.chunker,
                                         cfg.embedder, cache, work)

    def _retrieve(self, req: SystemRequest) -> dict[str, Any]:
        groups = sorted(req.user.groups) if req.user else None
        key = content_key("retrieve", self.index.key, req.question, req.filters,
                          groups if self.enforce_acl else "*", self.enforce_acl,
                          self.cfg.candidate_depth)
        hit = self.cache.get("retrieve", key)
        if hit is not None:
            return hit
        t0 = time.perf_counter()
        mask = self.index.allowed_mask(self.docs, req.filters, req.user, self.enforce_acl)
        ranked = self.index.search(req.question, mask, self.cfg.candidate_depth)
        value = {"ranked": ranked, "ms": (time.perf_counter() - t0) * 1000}
        self.cache.put("retrieve", key, value)
        self.work.add("retrievals")
        return value

    def _generate(self, question: str, context_texts: list[str]) -> dict[str, Any]:
        g, p = self.cfg.generator, self.cfg.prompt
        key = content_key("generate", GENERATION_VERSION, g.model_dump(), p.model_dump(),
                          question, context_texts)
        hit = self.cache.get("generate", key)
        if hit is not None:
            return hit
        t0 = time.perf_counter()
        if g.name == "extractive":
            value = generate_extractive(question, context_texts, g)
        else:
            value = generate_anthropic(question, context_texts, g, p, self.llm)
        value.setdefault("latency_ms", (time.perf_counter() - t0) * 1000)
        self.cache.put("generate", key, value)
        self.work.add("generations")
        return value

    def answer(self, req: SystemRequest) -> SystemOutput:
        r = self._retrieve(req)
        chunks = self.index.chunks
        cands = [(i, s, chunks[ci].text) for i, (ci, s) in enumerate(r["ranked"])]
        t0 = time.perf_counter()
        reranked = RERANKERS[self.cfg.reranker.name](req.question, cands, self.cfg.reranker)
        rerank_ms = (time.perf_counter() - t0) * 1000
        context, budget = [], self.cfg.context_token_budget
        for pos, score, text in reranked:
            if len(context) >= self.cfg.k:
                break
            n = count_tokens(text)
            if n > budget:
                continue
            budget -= n
            ch = chunks[r["ranked"][pos][0]]
            context.append({"doc_id": ch.doc_id, "text": ch.text, "score": round(score, 6),
                            "start": ch.start, "end": ch.end})
        gen = self._generate(req.question, [c["text"] for c in context])
        candidates = [{"doc_id": chunks[ci].doc_id, "text": chunks[ci].text,
                       "score": round(s, 6), "start": chunks[ci].start, "end": chunks[ci].end}
                      for ci, s in r["ranked"]]
        return SystemOutput(
            case_id=req.case_id, candidates=candidates, context=context, answer=gen["answer"],
            citations=gen.get("citations", []),
            latency_ms={"retrieve": round(r["ms"], 3), "rerank": round(rerank_ms, 3),
                        "generate": round(gen["latency_ms"], 3)},
            usage=gen.get("usage", {}))
