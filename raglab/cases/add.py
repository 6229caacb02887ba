"""``raglab cases add``: validate labelled cases and append them to the set, atomically.

Refused (each problem one line, naming file, line and case id; the set is left as it was):
a line that is not a case (schema), a draft still marked ``needs_labels`` or
``needs_review``, an id already
in the set (or earlier in the file), the same normalised question and filters as a case
already there, evidence whose document or quote is not in the corpus, an answerable case
without evidence.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from raglab.cases.drafts import question_key
from raglab.data.dataset import _case_warnings, _locate_case, load_cases, load_corpus
from raglab.data.io import atomic_write_text, iter_json_lines, parse_model
from raglab.data.schema import Case
from raglab.errors import UserError

DRAFT_FIELDS = ("draft",)


def check_new_cases(path: Path, cases_path: Path, corpus_path: Path,
                    fuzzy_threshold: float) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """``(cases to add, problems, warnings)`` of the file ``path`` against the set."""
    corpus = load_corpus(corpus_path)
    existing, _ = load_cases(cases_path)
    ids = {c.id: "the set" for c in existing}
    keys = {question_key(c.question, c.filters): c.id for c in existing}
    good: list[dict[str, Any]] = []
    problems: list[str] = []
    warnings: list[str] = []
    for lineno, obj in iter_json_lines(path, "cases file"):
        where = f"{path}:{lineno}" + (f" case {obj['id']}" if isinstance(obj.get("id"), str)
                                      else "")
        obj = {k: v for k, v in obj.items() if k not in DRAFT_FIELDS}
        if obj.pop("needs_labels", False):
            problems.append(f"{where}: a draft still marked needs_labels (write its labels, "
                            "then remove the field)")
            continue
        if obj.pop("needs_review", False):
            problems.append(f"{where}: a drafted case still marked needs_review (review it "
                            "with raglab cases review, which removes the mark)")
            continue
        try:
            case = parse_model(Case, obj, file=str(path), line=lineno)
        except UserError as e:
            problems.append(str(e))
            continue
        if case.id in ids:
            problems.append(f"{where}: duplicate id (already in {ids[case.id]})")
            continue
        key = question_key(case.question, case.filters)
        if key in keys:
            problems.append(f"{where}: duplicate of case {keys[key]} (same normalised question "
                            "and filters)")
            continue
        _, problem = _locate_case(case, corpus, fuzzy_threshold)
        if problem is not None:
            problems.append(f"{where}: {getattr(problem, 'reason', problem)}")
            continue
        if case.answerable and not case.evidence:
            problems.append(f"{where}: answerable case without evidence (label its evidence "
                            "or set answerable: false)")
            continue
        warnings += [f"{where}: warning: {w}" for w in _case_warnings(case, corpus)]
        ids[case.id] = f"{path} line {lineno}"
        keys[key] = case.id
        good.append(obj)  # as written (minus the draft notes)
    return good, problems, warnings


def append_cases(cases_path: Path, new: list[dict[str, Any]]) -> int:
    """Append to the cases file by writing the whole new file and renaming it into place
    (a failure leaves the old file). Returns the number of lines now in the file."""
    old = cases_path.read_text(encoding="utf-8")
    if old and not old.endswith("\n"):
        old += "\n"
    text = old + "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in new)
    mode = os.stat(cases_path).st_mode & 0o777
    atomic_write_text(cases_path, text)
    os.chmod(cases_path, mode)
    return sum(1 for ln in text.splitlines() if ln.strip())
