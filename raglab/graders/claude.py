"""Claude as the grader: rubric prompts, structured outputs, strict parsing.

Prompt templates (``grader.prompts``: ``decompose.txt``, ``verify.txt``, ``nuggets.txt``,
``relevance.txt``, and the optional grouped ones ``context.txt``, ``answer.txt``,
``references.txt``) are plain text. A line ``=== USER ===`` splits a template into the system
prompt (above) and the user message (below); without it the whole template is the user
message. Placeholders ``{question}``, ``{answer}``, ``{claims}``, ``{passages}``,
``{nuggets}``, ``{max_claims}``, ``{cited}`` and ``{items}`` are substituted in one pass
(a value that itself contains a placeholder is left as it is); templates are never formatted
or evaluated.

The passages go in the system prompt with ``cache_control``, so the calls of
``verification: per_claim`` (one call per claim, same system prompt) reuse the cached
prefix. Every structured output is validated strictly (one item per claim or nugget, each
index once, labels from the allowed set; a lone item may leave its index out); an output
that fails is asked for again once by the client, then each of its items alone
(:mod:`raglab.graders.fallback`); an item still unusable makes the judgment a
:class:`~raglab.llm.client.LLMCallError`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from raglab.components import NO_CONTEXT, BuildContext, Grader
from raglab.config import DecompositionCfg
from raglab.data.dataset import resolve_path
from raglab.data.schema import Strict
from raglab.data.verdicts import CLAIM_LABELS, NUGGET_LABELS
from raglab.errors import ConfigError
from raglab.graders.claude_grouped import GROUPED_PROMPTS, GroupedCalls
from raglab.graders.fallback import ASK_RETRIES, one_by_one
from raglab.graders.prompting import (
    DECOMPOSE_SCHEMA,
    NUGGETS_SCHEMA,
    PROMPT_NAMES,
    RELEVANCE_SCHEMA,
    VERIFY_SCHEMA,
    _numbered,
    _passages,
    parse_claims,
    parse_items,
    parse_relevance,
    passage_of,
    render,
)
from raglab.llm.client import LLMRequest, require_api_key
from raglab.registry import register


def load_prompts(directory: str) -> dict[str, str]:
    """The grader's prompt templates (text files ``NAME.txt``) from a folder."""
    d = Path(resolve_path(directory))
    if not d.is_dir():
        raise ConfigError(f"config grader.prompts: {d} is not a folder of prompt templates")
    out = {}
    for name in PROMPT_NAMES:
        p = d / f"{name}.txt"
        if not p.is_file():
            raise ConfigError(f"config grader.prompts: {p} is missing")
        out[name] = p.read_text(encoding="utf-8")
    for name in GROUPED_PROMPTS:  # optional: without one, its judgments keep separate calls
        p = d / f"{name}.txt"
        if p.is_file():
            out[name] = p.read_text(encoding="utf-8")
    return out


class ModelGraderCfg(Strict):
    """What every model judge has (``grader=claude``, ``grader=openai``): a backend's own
    settings are added by its grader's schema."""

    name: str
    model: str = Field(min_length=1)
    max_tokens: int = Field(2048, gt=0, le=1_000_000)
    prompts: str
    decomposition: DecompositionCfg = Field(default_factory=DecompositionCfg)
    verification: Literal["batched", "per_claim"] = Field("batched", description=(
        "per_claim: one criterion per call; batched: all claims of an answer in one "
        "structured call"))
    concurrency: int = Field(8, ge=1, le=1024)
    timeout_s: float = Field(60.0, gt=0, le=86400)
    max_retries: int = Field(5, ge=0, le=100)
    mode: Literal["online", "batch"] = Field("online", description=(
        "online: Messages API; batch: Message Batches API (half the price, results within "
        "24 h)"))
    batch_poll_s: float = Field(30.0, gt=0)
    prices: dict[str, float] = Field(default_factory=dict)
    repeats: int = Field(1, ge=1, le=100, description=(
        "independent judgments per item (README \"Grader calibration\"); run metrics are "
        "their mean; at most 100"))


class ClaudeGraderCfg(ModelGraderCfg):
    name: Literal["claude"]


@register("grader", "claude", config=ClaudeGraderCfg)
class ClaudeGrader(GroupedCalls, Grader):
    """The Claude grader; same async interface as the heuristic one, plus the grouped calls
    of ``verification: batched`` (:mod:`raglab.graders.claude_grouped`)."""

    uses_llm = True
    llm_backend = "anthropic"  #: the wire protocol of its requests (raglab.llm.backends)

    @classmethod
    def preflight(cls, run_cfg: Any) -> None:
        require_api_key("grader=claude")
        load_prompts(run_cfg.grader.prompts)

    @classmethod
    def load_prompts(cls, cfg: ClaudeGraderCfg) -> dict[str, str]:
        """The prompt texts this grader's metric versions depend on."""
        return load_prompts(cfg.prompts)

    @classmethod
    def llm_settings(cls, cfg: ClaudeGraderCfg, run_cfg: Any) -> dict[str, Any]:
        """The LLM client settings of a run graded by Claude (they win over the
        generator's: one client per run)."""
        from raglab.llm.prices import model_prices_of

        return dict(timeout_s=cfg.timeout_s, max_retries=cfg.max_retries,
                    concurrency=cfg.concurrency, mode=cfg.mode, batch_poll_s=cfg.batch_poll_s,
                    prices=model_prices_of(cfg, run_cfg))

    def __init__(self, cfg: Any, ctx: BuildContext = NO_CONTEXT, repeat: int = 0):
        self.cfg = cfg
        self.ctx = ctx
        self.prompts = dict(ctx.prompts)
        self.llm = ctx.llm
        self.repeat = repeat

    def for_repeat(self, repeat: int) -> ClaudeGrader:
        """The same grader asking as independent repeat ``repeat`` (grader.repeats)."""
        return type(self)(self.cfg, self.ctx, repeat)

    def request_routing(self) -> dict[str, Any]:
        """The backend, its options and endpoint of this grader's requests (Anthropic's
        Messages API needs neither)."""
        return {"backend": self.llm_backend}

    def prompt_texts(self) -> dict[str, str]:
        return dict(self.prompts)

    def _request(self, name: str, values: dict[str, str], schema: dict,
                 cache_system: bool) -> LLMRequest:
        system, user = render(self.prompts[name], values)
        return LLMRequest(model=self.cfg.model, system=system, user=user,
                          max_tokens=self.cfg.max_tokens,
                          purpose="grade", schema=schema, cache_system=cache_system,
                          repeat=self.repeat, **self.request_routing())

    async def _ask(self, req: LLMRequest, parse) -> Any:
        """One structured call, its answer parsed (re-asked once when unusable)."""
        resp = await self.llm.complete(req, validate=parse, format_retries=ASK_RETRIES)
        return parse(resp.parsed)

    async def _ask_items(self, whole, n: int, item, join=list) -> Any:
        """``whole()``, or its ``n`` items one at a time when its answers were unusable
        (:func:`raglab.graders.fallback.one_by_one`)."""
        return await one_by_one(self.llm, whole, n, item, join)

    async def decompose(self, question: str, answer: str) -> list[str]:
        if not answer.strip():
            return []
        mx = self.cfg.decomposition.max_claims
        req = self._request("decompose", {"question": question, "answer": answer,
                                          "max_claims": str(mx)}, DECOMPOSE_SCHEMA, True)
        return await self._ask_items(lambda: self._ask(req, lambda p: parse_claims(p, mx)), 1,
                                     None)

    async def verify(self, claims: list[str], passages: list[str],
                     family: str) -> list[list[str | int | None]]:
        """``[label, evidence quote or None, index of the passage holding the quote or
        None]`` per claim."""
        claims = list(claims)
        if not claims:
            return []
        if not any(p.strip() for p in passages):
            return [["NOT_FOUND", None, None] for _ in claims]  # nothing to be supported by
        ctx = _passages(passages)
        if self.cfg.verification == "per_claim" and len(claims) > 1:
            parts = await asyncio.gather(*(self._ask_items(
                lambda c=c: self._verify(ctx, [c], True), 1, None) for c in claims))
            res = [p[0] for p in parts]
        else:
            res = await self._ask_items(
                lambda: self._verify(ctx, claims, self.cfg.verification == "per_claim"),
                len(claims), lambda i: self._one(self._verify(ctx, [claims[i]], True)))
        return [[lab, ev, passage_of(ev, passages)] for lab, ev in res]

    async def _verify(self, ctx: str, claims: list[str], cache: bool) -> list:
        req = self._request("verify", {"passages": ctx, "claims": _numbered("claim", claims)},
                            VERIFY_SCHEMA, cache)
        n = len(claims)
        return await self._ask(req, lambda p: parse_items(p, "verdicts", "claim_index", n,
                                                          CLAIM_LABELS))

    async def nuggets(self, question: str, answer: str,
                      nuggets: list[str]) -> list[list[str | None]]:
        nuggets = list(nuggets)
        if not nuggets:
            return []
        return await self._ask_items(
            lambda: self._nuggets(question, answer, nuggets), len(nuggets),
            lambda i: self._one(self._nuggets(question, answer, [nuggets[i]])))

    @staticmethod
    async def _one(job) -> Any:
        """The one result of a call for one item."""
        return (await job)[0]

    async def _nuggets(self, question: str, answer: str,
                       nuggets: list[str]) -> list[list[str | None]]:
        req = self._request("nuggets", {"question": question, "answer": answer,
                                        "nuggets": _numbered("nugget", nuggets)},
                            NUGGETS_SCHEMA, True)
        n = len(nuggets)
        return await self._ask(req, lambda p: parse_items(p, "judgments", "nugget_index", n,
                                                          NUGGET_LABELS))

    async def relevance(self, question: str, answer: str) -> list[str]:
        req = self._request("relevance", {"question": question, "answer": answer},
                            RELEVANCE_SCHEMA, True)
        return await self._ask_items(lambda: self._ask(req, parse_relevance), 1, None)

    async def aclose(self) -> None:
        return None  # the client belongs to the run, which closes it
