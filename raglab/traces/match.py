"""Traces of a traced offline run, paired with the run's cases (``system=replay``).

A trace goes to the case its case-id attribute names (``raglab.case_id`` by default), or,
failing that, to the first case not yet paired whose question is exactly the trace's
question. Traces that pair with no case, and second traces of a case, are counted in a
warning (as replayed lines for cases not in the set are); bad traces are counted by kind.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from raglab.data.schema import SystemOutput
from raglab.traces.problems import MALFORMED, Problems

OUTPUT_FIELDS = ("case_id", "candidates", "context", "answer", "latency_ms", "usage", "model")


@dataclass
class Paired:
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # case id -> dump
    unmatched: list[str] = field(default_factory=list)  # trace ids
    duplicates: list[str] = field(default_factory=list)  # trace ids

    def warnings(self, source: str, problems: Problems) -> list[str]:
        out = []
        if problems.counts:
            read = len(self.outputs) + len(self.unmatched) + len(self.duplicates)
            out.append(f"{source}: {problems.account(read)}; {problems.bad} bad trace(s) not used"
                       + (f", {problems.counts['no content']} without content"
                          if "no content" in problems.counts else "")
                       + f" ({problems.summary()}); first of each: "
                       + "; ".join(first for _, _, first in problems.ordered()))
        for what, ids in (("matched no case of the set", self.unmatched),
                          ("were second traces of a case already paired, ignored",
                           self.duplicates)):
            if ids:
                shown = ", ".join(json.dumps(t) for t in ids[:3])
                out.append(f"{source}: {len(ids)} trace(s) {what} ({shown}"
                           f"{', ...' if len(ids) > 3 else ''})")
        return out


def pair(records: Iterable[tuple[int | None, dict[str, Any]]], cases: Iterable[Any] | None,
         problems: Problems, source: str = "") -> Paired:
    """``records`` (:func:`raglab.traces.source.records`) paired with ``cases`` (objects
    with ``id`` and ``question``; None: every trace keyed by its case id, else its trace
    id)."""
    known: set[str] | None = None
    by_question: dict[str, list[str]] = {}
    if cases is not None:
        known = set()
        for c in cases:
            known.add(c.id)
            by_question.setdefault(c.question, []).append(c.id)
    got = Paired()
    for line, rec in records:
        cid = rec.get("case_id")
        if known is None:
            cid = cid or rec["trace_id"]
        elif cid not in known:
            free = [c for c in by_question.get(rec["question"], ()) if c not in got.outputs]
            taken = by_question.get(rec["question"])
            if free:
                cid = free[0]
            elif taken:
                got.duplicates.append(rec["trace_id"])
                continue
            else:
                got.unmatched.append(rec["trace_id"])
                continue
        if cid in got.outputs:
            got.duplicates.append(rec["trace_id"])
            continue
        out = {k: rec[k] for k in OUTPUT_FIELDS if k in rec}
        out["case_id"] = cid
        try:
            got.outputs[cid] = SystemOutput.model_validate(out).model_dump()
        except ValidationError as e:
            problems.add(MALFORMED, source, line, rec["trace_id"],
                         f"not a system output: {e.errors()[0]['msg']}")
    return got
