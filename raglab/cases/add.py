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
from raglab.data.conversation import flatten, is_conversation, parse_case
from raglab.data.dataset import _case_warnings, _locate_case, load_cases, load_corpus
from raglab.data.io import atomic_write_text, iter_json_lines
from raglab.errors import UserError

DRAFT_FIELDS = ("draft",)


def check_new_cases(path: Path, cases_path: Path, corpus_path: Path,
                    fuzzy_threshold: float) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """``(cases to add, problems, warnings)`` of the file ``path`` against the set."""
    corpus = load_corpus(corpus_path)
    existing, _ = load_cases(cases_path)
    ids = {c.id: "the set" for c in existing}
    # (a turn's question may repeat another's: only single-turn cases are kept apart by it)
    keys = {question_key(c.question, c.filters): c.id for c in existing
            if c.conversation is None}
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
        try:  # a conversation's turns are checked each as a case; the line is added whole
            turns = flatten(obj, file=str(path), line=lineno) if is_conversation(obj) \
                else [parse_case(obj, file=str(path), line=lineno)]
        except UserError as e:
            problems.append(str(e))
            continue
        found = [p for case in turns for p in _check_one(case, where, ids, keys, corpus,
                                                          fuzzy_threshold, warnings)]
        if found:
            problems += found
            continue
        for case in turns:
            ids[case.id] = f"{path} line {lineno}"
            if case.conversation is None:
                keys[question_key(case.question, case.filters)] = case.id
        good.append(obj)  # as written (minus the draft notes)
    return good, problems, warnings


def _check_one(case: Any, where: str, ids: dict[str, str], keys: dict[Any, str],
               corpus: Any, fuzzy_threshold: float, warnings: list[str]) -> list[str]:
    """The problems of one new case (a conversation's turn) against the set."""
    if case.conversation is not None:
        where = f"{where.split(' case ')[0]} case {case.id}"
    if case.id in ids:
        return [f"{where}: duplicate id (already in {ids[case.id]})"]
    key = question_key(case.question, case.filters)
    if key in keys and case.conversation is None:
        return [f"{where}: duplicate of case {keys[key]} (same normalised question and "
                "filters)"]
    _, problem = _locate_case(case, corpus, fuzzy_threshold)
    if problem is not None:
        return [f"{where}: {getattr(problem, 'reason', problem)}"]
    if case.answerable and not case.evidence and not (
            case.conversation is not None and any(n.from_turn for n in case.nuggets)):
        return [f"{where}: answerable case without evidence (label its evidence or set "
                "answerable: false)"]
    warnings += [f"{where}: warning: {w}" for w in _case_warnings(case, corpus)]
    return []


def n_cases(obj: dict[str, Any]) -> int:
    """The cases of a cases-file line: a conversation's turns, or the one case."""
    turns = obj.get("turns") if is_conversation(obj) else None
    return len(turns) if isinstance(turns, list) else 1


def append_cases(cases_path: Path, new: list[dict[str, Any]]) -> int:
    """Append to the cases file by writing the whole new file and renaming it into place
    (a failure leaves the old file). Returns the number of cases now in the file (a
    conversation's turns each one, as everywhere else; not its lines)."""
    old = cases_path.read_text(encoding="utf-8")
    if old and not old.endswith("\n"):
        old += "\n"
    text = old + "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in new)
    mode = os.stat(cases_path).st_mode & 0o777
    atomic_write_text(cases_path, text)
    os.chmod(cases_path, mode)
    return sum(n_cases(obj) for _, obj in iter_json_lines(cases_path, "cases file"))
