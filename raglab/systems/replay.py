"""Replay: score SystemOutput JSON Lines logged by any system, without calling it.

A replayed line with a bad value (NaN, Infinity, a lone surrogate) fails its own case with
that error, and the run goes on; a line that is not JSON, or not a SystemOutput, is refused
with one line. Outputs for cases not in the case set are counted in a warning.
"""

from __future__ import annotations

import json
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


class ReplayedValueError(ValueError):
    """A replayed output holding a value raglab refuses (this case fails)."""


@register("system", "replay", config=ReplaySystemCfg)
class ReplaySystem:
    @staticmethod
    def preflight(cfg: Any) -> None:
        check_readable_file(resolve_path(cfg.system.path), "replay file")

    def __init__(self, run_cfg: Any, dataset: Any = None, *_: Any):
        p = check_readable_file(resolve_path(run_cfg.system.path), "replay file")
        self.path = str(p)
        self.outputs: dict[str, SystemOutput] = {}
        self.bad: dict[str, str] = {}
        self.warnings: list[str] = []
        seen: dict[str, int] = {}

        def bad_value(lineno: int, obj: Any, message: str) -> None:
            cid = obj.get("case_id") if isinstance(obj, dict) else None
            if not isinstance(cid, str) or not cid:
                raise UserError(message, file=self.path, line=lineno)
            if cid in seen:
                raise UserError("duplicate case_id in replay file", file=self.path,
                                line=lineno, case_id=cid)
            seen[cid] = lineno
            self.bad[cid] = f"{self.path}:{lineno}: {message}"

        for lineno, obj in iter_json_lines(p, "replay file", bad_value=bad_value):
            out = parse_model(SystemOutput, obj, file=self.path, line=lineno)
            if out.case_id in seen:
                raise UserError("duplicate case_id in replay file", file=self.path, line=lineno,
                                case_id=out.case_id)
            seen[out.case_id] = lineno
            self.outputs[out.case_id] = out
        if dataset is not None:
            known = {c.id for c in dataset.cases} | {q.case_id for q in dataset.quarantined}
            extra = sorted(cid for cid in seen if cid not in known)
            if extra:
                shown = ", ".join(json.dumps(c) for c in extra[:3])
                self.warnings.append(
                    f"{self.path}: {len(extra)} replayed output(s) for cases not in the case "
                    f"set, ignored ({shown}{', ...' if len(extra) > 3 else ''})")

    def answer(self, req: SystemRequest) -> SystemOutput:
        if req.case_id in self.bad:
            raise ReplayedValueError(self.bad[req.case_id])
        out = self.outputs.get(req.case_id)
        if out is None:
            raise LookupError(f"no output for this case in {self.path}")
        return out
