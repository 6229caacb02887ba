"""Replay: score SystemOutput JSON Lines logged by any system, without calling it."""

from __future__ import annotations

from raglab.data.dataset import resolve_path
from raglab.data.io import check_readable_file, iter_json_lines, parse_model
from raglab.data.schema import SystemOutput
from raglab.errors import UserError
from raglab.systems.base import SystemRequest


class ReplaySystem:
    def __init__(self, path: str):
        p = check_readable_file(resolve_path(path), "replay file")
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
