"""A grader outside a run (``raglab calibrate``, ``raglab monitor``): the configured grader,
its own LLM client when it calls a model, and the cached :class:`Grading` over them."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from raglab import registry
from raglab.graders.orchestrate import Grading


@contextlib.asynccontextmanager
async def open_grading(cfg: Any, prompts: dict[str, str], versions: dict[str, str],
                       cache: Any, work: Any, repeats: int = 1) -> AsyncIterator[Grading]:
    """``Grading`` of ``cfg.grader`` (on the running loop); its client is closed on exit.
    ``grading.llm`` is the client (None for a grader that calls no model)."""
    llm = None
    if registry.hook("grader", cfg.grader.name, "uses_llm", False):
        from raglab.llm.client import LLMClient

        settings = registry.hook("grader", cfg.grader.name, "llm_settings")(cfg.grader, cfg)
        llm = LLMClient(**settings, cache=cache)
    grader = registry.build("grader", cfg.grader, prompts, llm)
    grading = Grading(grader, cfg.grader.name, versions, cache, work, repeats)
    grading.llm = llm
    try:
        yield grading
    finally:
        if llm is not None:
            await llm.aclose()
        await grader.aclose()


def prepare(cfg: Any) -> tuple[dict[str, str], dict[str, str]]:
    """The grader's checks before any work, then ``(prompt texts, family versions)``."""
    from raglab.errors import ConfigError
    from raglab.graders.spec import family_versions

    if cfg.grader.name == "none":
        raise ConfigError("grader=none judges nothing (choose grader=heuristic|claude)")
    check = registry.hook("grader", cfg.grader.name, "preflight")
    if check is not None:
        check(cfg)
    load = registry.hook("grader", cfg.grader.name, "load_prompts")
    prompts = dict(load(cfg.grader)) if load is not None else {}
    return prompts, family_versions(cfg.grader, prompts, cfg.metrics)
