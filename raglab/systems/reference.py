"""The reference RAG pipeline: chunker -> index -> filters/ACL -> reranker -> context -> generator.

Every stage result is reused through the stage cache: the index per corpus, chunker and
embedder; candidates per index, query, filters, visibility and depth; the answer per
context, prompt and generator.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from raglab import registry
from raglab.cache import StageCache, content_key
from raglab.components import BuildContext, System
from raglab.config import RunCfg
from raglab.data.schema import Strict, SystemOutput
from raglab.registry import register
from raglab.systems.base import SystemRequest, WorkCounter
from raglab.systems.index.store import build_or_load_index
from raglab.text.normalize import count_tokens

GENERATION_VERSION = 2  # 2: headings never glued to answers; citations from the shared split
#: the groups the reference pipeline is built from (in pipeline order)
PIPELINE_GROUPS = ("chunker", "embedder", "reranker", "generator")


class ReferenceSystemCfg(Strict):
    name: Literal["reference"]
    enforce_acl: bool = True
    # a conversation's turn (docs/conversations.md): the earlier user messages put before
    # the question to retrieve and rerank with (the answer is to the question): the last
    # one, all of them, or none (the history ignored)
    history: Literal["last", "all", "none"] = "last"


def with_history(req: SystemRequest, mode: str) -> str:
    """The text the pipeline searches and reranks with: the question, after the earlier
    user messages of its conversation that ``mode`` keeps (the plain question for a
    single-turn case)."""
    asked = [m["content"] for m in req.history if m.get("role") == "user"]
    if mode == "none" or not asked:
        return req.question
    return " ".join((asked[-1:] if mode == "last" else asked) + [req.question])


def context_within_budget(reranked: list[tuple[int, float, str]], k: int,
                          budget: int) -> list[tuple[int, float, str]]:
    """The first ``k`` reranked candidates that fit the context token budget, in order; a
    candidate too long for what is left is skipped (a shorter later one may still fit)."""
    out: list[Any] = []
    for cand in reranked:
        if len(out) >= k:
            break
        n = count_tokens(cand[2])
        if n > budget:
            continue
        budget -= n
        out.append(cand)
    return out


@register("system", "reference", config=ReferenceSystemCfg)
class ReferenceSystem(System):
    @classmethod
    def preflight(cls, run_cfg: RunCfg) -> None:
        """Each pipeline component's own checks (keys, optional extras)."""
        for group in PIPELINE_GROUPS:
            registry.entry(group, getattr(run_cfg, group).name).factory.preflight(run_cfg)

    @classmethod
    def llm_owner(cls, run_cfg: RunCfg) -> tuple[str, Any] | None:
        """The component that calls a model, if any: ``(group, its config)``."""
        if registry.entry("generator", run_cfg.generator.name).factory.uses_llm:
            return "generator", run_cfg.generator
        return None

    def __init__(self, cfg: ReferenceSystemCfg, ctx: BuildContext):
        run, dataset = ctx.run, ctx.dataset
        self.cfg = run
        self.ctx = ctx
        self.docs = dataset.corpus
        self.cache: StageCache = ctx.cache
        self.work: WorkCounter = ctx.work
        self.llm = ctx.llm
        self.enforce_acl = cfg.enforce_acl
        self.history = cfg.history
        self.index = build_or_load_index(dataset.corpus, dataset.corpus_hash, run.chunker,
                                         run.embedder, ctx.cache, ctx.work)
        self.reranker = registry.build("reranker", run.reranker, ctx)
        self.generator = registry.build("generator", run.generator, ctx)

    def _retrieve(self, req: SystemRequest, query: str) -> dict[str, Any]:
        groups = sorted(req.user.groups) if req.user else None
        key = content_key("retrieve", self.index.key, query, req.filters,
                          groups if self.enforce_acl else "*", self.enforce_acl,
                          self.cfg.candidate_depth)
        hit = self.cache.get("retrieve", key)
        if hit is not None:
            return hit
        t0 = time.perf_counter()
        mask = self.index.allowed_mask(self.docs, req.filters, req.user, self.enforce_acl)
        ranked = self.index.search(query, mask, self.cfg.candidate_depth)
        value = {"ranked": ranked, "ms": (time.perf_counter() - t0) * 1000}
        self.cache.put("retrieve", key, value)
        self.work.add("retrievals")
        return value

    def _generate(self, question: str, context_texts: list[str]) -> dict[str, Any]:
        g, p = self.cfg.generator, self.cfg.prompt
        # prices change the cost, not the answer: the cost is worked out from the recorded
        # token counts with the configured prices, cached or not
        key = content_key("generate", GENERATION_VERSION, g.model_dump(exclude={"prices"}),
                          p.model_dump(), question, context_texts)
        hit = self.cache.get("generate", key)
        if hit is not None:
            return _priced(hit, g, self.cfg.llm.prices)
        t0 = time.perf_counter()
        value = self.generator.generate(question, context_texts)
        value.setdefault("latency_ms", (time.perf_counter() - t0) * 1000)
        self.cache.put("generate", key, value)
        self.work.add("generations")
        return _priced(value, g, self.cfg.llm.prices)

    def answer(self, req: SystemRequest) -> SystemOutput:
        """The stage latencies are those measured when each stage was computed (a cached
        stage reports its recorded latency); ``total`` is their sum plus the time spent
        outside them (assembling the context, building the output), so a cached re-run
        reports what the pipeline takes, not the time of its cache lookups."""
        query = with_history(req, self.history)
        r = self._retrieve(req, query)
        t_retrieved = time.perf_counter()
        chunks = self.index.chunks
        cands = [(i, s, chunks[ci].text) for i, (ci, s) in enumerate(r["ranked"])]
        t0 = time.perf_counter()
        reranked = self.reranker.rerank(query, cands)
        rerank_ms = (time.perf_counter() - t0) * 1000
        context = []
        for pos, score, _ in context_within_budget(reranked, self.cfg.k,
                                                   self.cfg.context_token_budget):
            ch = chunks[r["ranked"][pos][0]]
            context.append({"doc_id": ch.doc_id, "text": ch.text, "score": round(score, 6),
                            "start": ch.start, "end": ch.end})
        t_gen = time.perf_counter()
        gen = self._generate(req.question, [c["text"] for c in context])
        t_generated = time.perf_counter()
        candidates = [{"doc_id": chunks[ci].doc_id, "text": chunks[ci].text,
                       "score": round(s, 6), "start": chunks[ci].start, "end": chunks[ci].end}
                      for ci, s in r["ranked"]]
        stages = {"retrieve": round(r["ms"], 3), "rerank": round(rerank_ms, 3),
                  "generate": round(gen["latency_ms"], 3)}
        out = SystemOutput.model_validate({
            "case_id": req.case_id, "candidates": candidates, "context": context,
            "answer": gen["answer"], "citations": gen.get("citations", []),
            "latency_ms": stages, "usage": gen.get("usage", {})})
        # outside the stages: context assembly, and building the output
        other_ms = ((t_gen - t_retrieved) + (time.perf_counter() - t_generated)) * 1000 \
            - rerank_ms
        out.latency_ms["total"] = round(sum(stages.values()) + max(0.0, other_ms), 3)
        return out


def _priced(value: dict[str, Any], g: Any, table: dict[str, Any]) -> dict[str, Any]:
    """A generation with ``usage.cost_usd`` from its token counts and its model's prices
    (``generator.prices``, else ``llm.prices``, else the shipped table; left out when the
    model has none: an unknown cost; the offline generator costs nothing)."""
    if not hasattr(g, "prices"):
        return value
    from raglab.llm.client import cost_usd
    from raglab.llm.prices import price_of

    usage = {k: v for k, v in (value.get("usage") or {}).items() if k != "cost_usd"}
    cost = cost_usd(usage, price_of(g.model, g.prices, table), batch=False)
    if cost is not None:
        usage["cost_usd"] = round(cost, 9)
    return {**value, "usage": usage}
