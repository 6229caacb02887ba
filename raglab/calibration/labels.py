"""Reading human labels for calibration, strictly: a bad line stops with file and line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from raglab.data.io import iter_json_lines, parse_model
from raglab.data.schema import HumanLabel
from raglab.errors import UserError


@dataclass(frozen=True)
class LabelLine:
    line: int
    label: HumanLabel


def load_labels(path: Path, questions: dict[str, str]) -> list[LabelLine]:
    """Every label of ``path``; UserError (file, line, case id) on the first bad one.

    Bad: not JSON, an unknown field or label value, an empty item or answer, a claim label
    without context, a nugget label whose case is not in the cases file (its question is
    part of what the grader is asked).
    """
    out: list[LabelLine] = []
    for lineno, obj in iter_json_lines(path, "labels file"):
        lab = parse_model(HumanLabel, obj, file=str(path), line=lineno)
        problem = _problem(lab, questions)
        if problem is not None:
            raise UserError(problem, file=str(path), line=lineno, case_id=lab.case_id)
        out.append(LabelLine(lineno, lab))
    return out


def _problem(lab: HumanLabel, questions: dict[str, str]) -> str | None:
    """What is wrong with a parsed label, or None."""
    if not lab.item.strip():
        return "empty item (the claim or nugget judged)"
    if not lab.answer.strip():
        return "empty answer (the answer the item was judged in)"
    if lab.kind == "claim" and not any(c.strip() for c in lab.context):
        return "claim label without context (the passages it was judged against)"
    if lab.kind == "nugget" and lab.case_id not in questions:
        return ("nugget label for a case that is not in the cases file "
                "(set dataset.cases to the file with its question)")
    return None
