"""A grader outside a run (``raglab calibrate``, ``raglab monitor``): the configured grader,
its own LLM client when it calls a model, and the cached :class:`Grading` over them."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from raglab import registry
from raglab.components import BuildContext
from raglab.graders.orchestrate import Grading


@contextlib.asynccontextmanager
async def open_grading(cfg: Any, prompts: dict[str, str], versions: dict[str, str],
                       cache: Any, work: Any, repeats: int = 1) -> AsyncIterator[Grading]:
    """``Grading`` of ``cfg.grader`` (on the running loop); its client is closed on exit.
    ``grading.llm`` is the client (None for a grader that calls no model)."""
    llm = None
    kind = registry.entry("grader", cfg.grader.name).factory
    if kind.uses_llm:
        from raglab.llm.client import LLMClient

        llm = LLMClient(**kind.llm_settings(cfg.grader, cfg), cache=cache)
    grader = registry.build("grader", cfg.grader, BuildContext(run=cfg, cache=cache, work=work,
                                                               llm=llm, prompts=prompts))
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

    kind = registry.entry("grader", cfg.grader.name).factory
    if not kind.grades:
        raise ConfigError(f"grader={cfg.grader.name} judges nothing "
                          "(choose grader=heuristic|claude|openai)")
    kind.preflight(cfg)
    prompts = dict(kind.load_prompts(cfg.grader))
    return prompts, family_versions(cfg.grader, prompts, cfg.metrics)
