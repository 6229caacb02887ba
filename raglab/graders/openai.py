"""A judge behind any OpenAI-compatible server (OpenAI, Azure OpenAI, vLLM, Ollama,
llama.cpp's server, LM Studio): the Claude grader's prompts, schemas, strict parsing and
grouped calls, sent through the ``openai`` backend (:mod:`raglab.llm.backends.openai`).

Its metric versions hash the backend (``name: openai``), the model, the prompts and the
settings, ``structured_output`` among them, but never ``base_url`` or a key: the same model
behind another URL is the same judge.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from raglab.graders.claude import ClaudeGrader, ModelGraderCfg, load_prompts
from raglab.llm.backends.openai import OpenAIOptions, check_usable, endpoint_of, options_of
from raglab.registry import register


class OpenAIGraderCfg(OpenAIOptions, ModelGraderCfg):
    name: Literal["openai"]
    mode: Literal["online", "batch"] = Field("online", description=(
        "online: Chat Completions; batch: OpenAI's Batch API (half the price, results within "
        "24 h; a server without it is asked online)"))


@register("grader", "openai", config=OpenAIGraderCfg)
class OpenAIGrader(ClaudeGrader):
    """The model judge of ``grader=claude`` over the OpenAI Chat Completions protocol."""

    llm_backend = "openai"

    @classmethod
    def preflight(cls, run_cfg: Any) -> None:
        check_usable("grader=openai", run_cfg.grader)
        load_prompts(run_cfg.grader.prompts)

    def request_routing(self) -> dict[str, Any]:
        return {"backend": self.llm_backend, "options": options_of(self.cfg),
                "endpoint": endpoint_of(self.cfg)}
