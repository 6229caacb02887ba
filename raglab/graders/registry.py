"""The grader registry: ``grader.name`` -> a grader (or None for ``grader=none``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from raglab.data.dataset import resolve_path
from raglab.errors import ConfigError

PROMPT_NAMES = ("decompose", "verify", "nuggets", "relevance")


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
    return out


def require_api_key(what: str) -> None:
    if not os.environ.get("ANTHROPIC_API_KEY"):
        raise ConfigError(f"{what} needs ANTHROPIC_API_KEY in the environment "
                          "(and ANTHROPIC_BASE_URL for a non-default endpoint)")


def preflight(cfg: Any) -> dict[str, str]:
    """Checks before any work; returns the grader's prompt texts (empty when none)."""
    if cfg.grader.name == "claude":
        require_api_key("grader=claude")
        return load_prompts(cfg.grader.prompts)
    return {}


def build_grader(cfg: Any, prompts: dict[str, str], llm: Any) -> Any:
    name = cfg.grader.name
    if name == "none":
        return None
    if name == "heuristic":
        from raglab.graders.heuristic import HeuristicGrader

        return HeuristicGrader(cfg.grader)
    from raglab.graders.claude import ClaudeGrader

    return ClaudeGrader(cfg.grader, prompts, llm)
