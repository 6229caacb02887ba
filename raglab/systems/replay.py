"""Replay: score SystemOutput JSON Lines logged by any system, without calling it."""

from __future__ import annotations

from typing import Any, Literal

from raglab.data.dataset import resolve_path
from raglab.data.io import check_readable_file, iter_json_lines, parse_model
from raglab.data.schema import Strict, SystemOutput
from raglab.errors import UserError
from raglab.registry import register
from raglab.systems.base import SystemRequest


class ReplaySystemCfg(Strict):
    name: Literal["replay"]
    path: str


@register("system", "replay", config=ReplaySystemCfg)
class ReplaySystem:
    @staticmethod
    def preflight(cfg: Any) -> None:
        check_readable_file(resolve_path(cfg.system.path), "replay file")

    def __init__(self, run_cfg: Any, *_: Any):
        p = check_readable_file(resolve_path(run_cfg.system.path), "replay file")
        self.path = str(p)
        self.outputs: dict[str, SystemOutput] = {}
        for lineno, obj in iter_json_lines(p, "replay file"):
            out = parse_model(SystemOutput, obj, file=self.path, line=lineno)
            if out.case_id in self.outputs:
                raise UserError("duplicate case_id in replay file", file=self.path, line=lineno,
                                case_id=out.case_id)
            self.outputs[out.case_id] = out

    def answer(self, req: SystemRequest) -> SystemOutput:
        out = self.outputs.get(req.case_id)
        if out is None:
            raise LookupError(f"no output for this case in {self.path}")
        return out
