"""Generators of the reference pipeline (``generator`` group): ``extractive`` (offline),
``anthropic`` (Claude) and ``openai`` (any OpenAI-compatible server). A generator
(:class:`raglab.components.Generator`) is made from its
config and the build context (the run's prompt config, its LLM client or None) and has
``generate(question, context_texts) -> dict`` with ``answer``, ``citations``, ``usage``
(and optionally ``latency_ms``, ``cached``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from raglab.components import NO_CONTEXT, BuildContext, Generator
from raglab.data.schema import Strict
from raglab.llm.backends.openai import OpenAIEndpoint
from raglab.registry import register
from raglab.text.answers import parse_citations
from raglab.text.lexical import content_terms, coverage
from raglab.text.sentences import segments


class ExtractiveGenCfg(Strict):
    name: Literal["extractive"]
    max_sentences: int = Field(2, gt=0, le=1000)
    min_score: float = Field(0.35, ge=0, le=1)
    refusal: str


class ModelGenCfg(Strict):
    """What every model generator has; a backend's own settings are added by its schema."""

    name: str
    model: str = Field(min_length=1)
    max_tokens: int = Field(512, gt=0, le=1_000_000)
    timeout_s: float = Field(60.0, gt=0, le=86400)
    max_retries: int = Field(4, ge=0, le=100)
    refusal: str
    # USD per million tokens (input, output, cache_write, cache_read): the system's cost
    prices: dict[str, float] = Field(default_factory=dict)


class AnthropicGenCfg(ModelGenCfg):
    name: Literal["anthropic"]


class OpenAIGenCfg(OpenAIEndpoint, ModelGenCfg):
    name: Literal["openai"]


def render_prompt(template: str, question: str, context_texts: list[str]) -> str:
    """Plain substitution of {question} and {context} (never str.format or eval)."""
    ctx = "\n\n".join(f"[{i + 1}] {t}" for i, t in enumerate(context_texts))
    return template.replace("{context}", ctx).replace("{question}", question)


def generate_extractive(question: str, context_texts: list[str], cfg: Any) -> dict[str, Any]:
    """Pick the context sentences covering most of the question's content terms.

    Headings are never picked, nor glued to the sentence below them. Answers
    ``cfg.refusal`` when no sentence covers at least ``cfg.min_score`` of them.
    """
    q = set(content_terms(question))
    scored: list[tuple[float, int, int, str]] = []
    for ci, text in enumerate(context_texts):
        for si, seg in enumerate(segments(text)):
            if not seg.heading:
                scored.append((coverage(q, seg.text), ci, si, seg.text))
    scored.sort(key=lambda r: (-r[0], r[1], r[2]))
    picked = [r for r in scored[: cfg.max_sentences] if r[0] >= cfg.min_score and r[0] > 0]
    seen: set[str] = set()
    unique = []
    for r in picked:  # the first of each repeated sentence text
        if r[3] not in seen:
            seen.add(r[3])
            unique.append(r)
    picked = unique
    if not picked:
        return {"answer": cfg.refusal, "citations": [], "usage": {"cost_usd": 0.0}}
    picked.sort(key=lambda r: (r[1], r[2]))
    answer = " ".join(f"{sent} [{ci + 1}]" for _, ci, _, sent in picked)
    # the citations index the one answer split (raglab.text.answers) the graders use
    return {"answer": answer, "citations": parse_citations(answer, len(context_texts)),
            "usage": {"cost_usd": 0.0}}


def generate_with_model(question: str, context_texts: list[str], cfg: Any, prompt: Any,
                        llm: Any, **routing: Any) -> dict[str, Any]:
    """A model through the one LLM client (cached, retried, usage and latency recorded);
    ``routing``: the request's backend, options and endpoint."""
    from raglab.llm.client import LLMRequest

    req = LLMRequest(model=cfg.model, system=prompt.system,
                     user=render_prompt(prompt.template, question, context_texts),
                     max_tokens=cfg.max_tokens, purpose="generate", **routing)
    resp = llm.complete_sync(req)
    answer = resp.text.strip()
    return {"answer": answer, "citations": parse_citations(answer, len(context_texts)),
            "usage": resp.usage_dict(), "cached": resp.cached, "latency_ms": resp.latency_ms}


@register("generator", "extractive", config=ExtractiveGenCfg)
class ExtractiveGenerator(Generator):
    """Offline: the context sentences covering most of the question (no model)."""

    def generate(self, question: str, context_texts: list[str]) -> dict[str, Any]:
        return generate_extractive(question, context_texts, self.cfg)


@register("generator", "anthropic", config=AnthropicGenCfg)
class AnthropicGenerator(Generator):
    """Claude, prompted with the run's ``prompt``, through the run's LLM client."""

    uses_llm = True
    llm_backend = "anthropic"  #: the wire protocol of its requests (raglab.llm.backends)

    def __init__(self, cfg: ModelGenCfg, ctx: BuildContext = NO_CONTEXT):
        super().__init__(cfg, ctx)
        self.prompt = ctx.run.prompt if ctx.run is not None else None
        self.llm = ctx.llm

    @classmethod
    def preflight(cls, run_cfg: Any) -> None:
        from raglab.llm.client import require_api_key

        require_api_key("generator=anthropic")

    @classmethod
    def llm_settings(cls, cfg: ModelGenCfg, run_cfg: Any) -> dict[str, Any]:
        """The LLM client settings when the generator is the only model user."""
        from raglab.llm.prices import model_prices_of

        return dict(timeout_s=cfg.timeout_s, max_retries=cfg.max_retries,
                    concurrency=run_cfg.concurrency, mode="online", batch_poll_s=30.0,
                    prices=model_prices_of(cfg, run_cfg))

    def routing(self) -> dict[str, Any]:
        """The backend (and its options, endpoint) of this generator's requests."""
        return {"backend": self.llm_backend}

    def generate(self, question: str, context_texts: list[str]) -> dict[str, Any]:
        return generate_with_model(question, context_texts, self.cfg, self.prompt, self.llm,
                                   **self.routing())


@register("generator", "openai", config=OpenAIGenCfg)
class OpenAIGenerator(AnthropicGenerator):
    """A model behind an OpenAI-compatible server (Chat Completions), prompted with the
    run's ``prompt``, through the run's LLM client."""

    llm_backend = "openai"

    @classmethod
    def preflight(cls, run_cfg: Any) -> None:
        from raglab.llm.backends.openai import check_usable

        check_usable("generator=openai", run_cfg.generator)

    def routing(self) -> dict[str, Any]:
        from raglab.llm.backends.openai import endpoint_of, options_of

        return {"backend": self.llm_backend, "options": options_of(self.cfg),
                "endpoint": endpoint_of(self.cfg)}
