"""Traces of a traced offline run, paired with the run's cases (``system=replay``).

A trace goes to the case its case-id attribute names (``raglab.case_id`` by default), or,
failing that, to the first case not yet paired whose question is exactly the trace's
question. Traces that pair with no case, and second traces of a case, are counted in a
warning (as replayed lines for cases not in the set are); bad traces are counted by kind.

When the cases hold conversations (raglab.data.conversation), a trace with a session id
and no case-id attribute is a turn: the traces of one session, ordered by start time (then
as read), are the turns of one conversation, the k-th trace the turn ``CONV.tK``. The
conversation is the one the session id names, else the first one not yet paired whose first
turn asks the session's first question; a session that is neither is paired trace by trace
as above. A trace whose question is not its turn's is not used (counted as
:data:`~raglab.traces.problems.TURN_QUESTION`, the first one shown); traces past the
conversation's last turn pair with no case. Without conversations in the set, session ids
play no part.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from raglab.data.schema import SystemOutput
from raglab.traces.problems import MALFORMED, TURN_QUESTION, Problems

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
    with ``id`` and ``question``, and ``conversation`` on a conversation's turns; None:
    every trace keyed by its case id, else its trace id)."""
    known: set[str] | None = None
    by_question: dict[str, list[str]] = {}
    convs: dict[str, dict[int, Any]] = {}  # conversation id -> {turn: case}
    if cases is not None:
        known = set()
        for c in cases:
            known.add(c.id)
            by_question.setdefault(c.question, []).append(c.id)
            turn = getattr(c, "conversation", None)
            if turn is not None:
                convs.setdefault(turn.id, {})[turn.turn] = c
    got = Paired()
    sessions: dict[str, list[tuple[int | None, dict[str, Any]]]] = {}
    for line, rec in records:
        cid = rec.get("case_id")
        if known is None:
            cid = cid or rec["trace_id"]
        elif cid not in known:
            session = rec.get("session")
            if convs and session:
                if rec["question"] not in by_question:  # never kept: only its place counts
                    rec = {k: rec[k] for k in ("trace_id", "question", "timestamp")}
                sessions.setdefault(session, []).append((line, rec))
                continue
            cid = _by_question(rec, by_question, got)
            if cid is None:
                continue
        _keep(got, cid, line, rec, problems, source)
    if sessions:
        _turns(sessions, convs, by_question, got, problems, source)
    return got


def _by_question(rec: dict[str, Any], by_question: dict[str, list[str]],
                 got: Paired) -> str | None:
    """The first case not yet paired that asks the trace's question (None: the trace is
    counted as unmatched, or as a second trace of a case)."""
    taken = by_question.get(rec["question"])
    free = [c for c in taken or () if c not in got.outputs]
    if free:
        return free[0]
    (got.duplicates if taken else got.unmatched).append(rec["trace_id"])
    return None


def _keep(got: Paired, cid: str, line: int | None, rec: dict[str, Any], problems: Problems,
          source: str) -> None:
    if cid in got.outputs:
        got.duplicates.append(rec["trace_id"])
        return
    out = {k: rec[k] for k in OUTPUT_FIELDS if k in rec}
    out["case_id"] = cid
    try:
        got.outputs[cid] = SystemOutput.model_validate(out).model_dump()
    except ValidationError as e:
        problems.add(MALFORMED, source, line, rec["trace_id"],
                     f"not a system output: {e.errors()[0]['msg']}")


def _start(rec: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(rec["timestamp"])


def _turns(sessions: dict[str, list[tuple[int | None, dict[str, Any]]]],
           convs: dict[str, dict[int, Any]], by_question: dict[str, list[str]], got: Paired,
           problems: Problems, source: str) -> None:
    """Each session's traces, by start time, as the turns of its conversation."""
    claimed: set[str] = set()
    firsts: dict[str, list[str]] = {}  # a first turn's question -> its conversations
    for conv_id, turns in convs.items():
        if 1 in turns:
            firsts.setdefault(turns[1].question, []).append(conv_id)
    ordered = {s: sorted(ts, key=lambda t: _start(t[1])) for s, ts in sessions.items()}
    # sessions named after a conversation first, so a question match cannot take it
    for session in sorted(ordered, key=lambda s: s not in convs):
        traces = ordered[session]
        conv = session if session in convs else next(
            (cid for cid in firsts.get(traces[0][1]["question"], ()) if cid not in claimed),
            None)
        if conv is None:
            for line, rec in traces:
                cid = _by_question(rec, by_question, got)
                if cid is not None:
                    _keep(got, cid, line, rec, problems, source)
            continue
        claimed.add(conv)
        turns = convs[conv]
        for k, (line, rec) in enumerate(traces, start=1):
            case = turns.get(k)
            if case is None:
                got.unmatched.append(rec["trace_id"])
            elif rec["question"] != case.question:
                problems.add(TURN_QUESTION, source, line, rec["trace_id"],
                             f"session {session!r} trace {k} asks {rec['question']!r}, "
                             f"turn {case.id} asks {case.question!r}")
            else:
                _keep(got, case.id, line, rec, problems, source)
