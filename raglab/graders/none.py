"""``grader=none``: no grader; a run scores retrieval, context and abstention metrics only."""

from __future__ import annotations

from typing import Any, Literal

from raglab.data.schema import Strict
from raglab.registry import register


class NoGraderCfg(Strict):
    name: Literal["none"]


@register("grader", "none", config=NoGraderCfg)
def no_grader(cfg: NoGraderCfg, prompts: Any = None, llm: Any = None) -> None:
    """No grader object: the run skips grading."""
    return None
