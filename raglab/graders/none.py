"""``grader=none``: no grader; a run scores retrieval, context and abstention metrics only."""

from __future__ import annotations

from typing import Literal

from raglab.components import Grader
from raglab.data.schema import Strict
from raglab.registry import register


class NoGraderCfg(Strict):
    name: Literal["none"]


@register("grader", "none", config=NoGraderCfg)
class NoGrader(Grader):
    """Grades nothing: no grader object is made, the run skips grading."""

    grades = False
