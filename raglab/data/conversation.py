"""Conversations: multi-turn cases, flattened into one case per turn (docs/conversations.md).

A line of a cases file with a ``turns`` key is a conversation. Each turn becomes an ordinary
:class:`~raglab.data.schema.Case` with the id ``CONV.tK``, the tags ``conversation``,
``turn``, ``turn_kind`` (and ``permission_change`` where the user changed), and a
:class:`~raglab.data.schema.Turn` holding its place and the frozen history: the earlier
turns' questions and reference answers. Every metric, slice and statistic then works on
turns as on cases; conversation-level figures group turns by their conversation.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, StrictBool, ValidationError

from raglab.data.schema import (
    MAX_WEIGHT,
    Case,
    Evidence,
    FilterValue,
    Forbidden,
    Nugget,
    Strict,
    User,
)
from raglab.errors import UserError

#: tags every turn gets from its place in the conversation (reserved in written tags)
TURN_TAGS = ("conversation", "turn", "turn_kind", "permission_change")
TURN_KINDS = ("first", "follow_up", "topic_shift", "continuation")
MAX_TURNS = 20


class TurnIn(Strict):
    """A turn as written: a case's fields without its id, and how the turn is marked.
    ``user`` and ``filters``, when given, hold for this turn and the turns after it."""

    question: str = Field(min_length=1)
    filters: dict[str, FilterValue] | None = None
    user: User | None = None
    reference_answer: str | None = None
    evidence: list[Evidence] = Field(default_factory=list)
    nuggets: list[Nugget] = Field(default_factory=list)
    answerable: StrictBool = True
    tags: dict[str, str] = Field(default_factory=dict)
    weight: float | None = Field(None, ge=0, le=MAX_WEIGHT, allow_inf_nan=False)
    must_not_contain: list[str | Forbidden] = Field(default_factory=list)
    follow_up: StrictBool = False
    topic_shift: StrictBool = False


class ConversationIn(Strict):
    id: str = Field(min_length=1)
    user: User | None = None
    filters: dict[str, FilterValue] = Field(default_factory=dict)
    tags: dict[str, str] = Field(default_factory=dict)
    weight: float | None = Field(None, ge=0, le=MAX_WEIGHT, allow_inf_nan=False)
    turns: list[TurnIn] = Field(min_length=1, max_length=MAX_TURNS)


def turn_id(conversation_id: str, turn: int) -> str:
    return f"{conversation_id}.t{turn}"


def is_conversation(obj: dict[str, Any]) -> bool:
    return "turns" in obj


def flatten(obj: dict[str, Any], *, file: str, line: int) -> list[Case]:
    """The turns of one conversation line as cases; UserError naming the file, the line
    and the turn (``CONV.tK``) on the first problem."""
    from raglab.data.io import describe_validation_error

    conv_id = obj.get("id") if isinstance(obj.get("id"), str) and obj.get("id") else None
    try:
        conv = ConversationIn.model_validate(obj)
    except ValidationError as e:
        loc = e.errors()[0]["loc"]
        where, message = conv_id, describe_validation_error(e, ConversationIn)
        if len(loc) >= 2 and loc[0] == "turns" and isinstance(loc[1], int):
            where = turn_id(conv_id, loc[1] + 1) if conv_id else None
            message = message.replace(f"turns.{loc[1]}.", "", 1)
            if len(loc) == 2:  # the turn itself is not an object
                message = f"a turn must be a JSON object, not {_json_kind(obj['turns'][loc[1]])}"
            if not conv_id:
                message = f"turn {loc[1] + 1}: {message}"
        raise UserError(message, file=file, line=line, case_id=where) from None
    for key in conv.tags:
        _check_tag(key, file, line, conv.id)
    cases: list[Case] = []
    user, filters = conv.user, dict(conv.filters)
    history: list[dict[str, str]] = []
    n = len(conv.turns)
    for k, t in enumerate(conv.turns, start=1):
        cid = turn_id(conv.id, k)
        for key in t.tags:
            _check_tag(key, file, line, cid)
        if t.follow_up and t.topic_shift:
            raise UserError("a turn is marked both follow_up and topic_shift", file=file,
                            line=line, case_id=cid)
        if k == 1 and (t.follow_up or t.topic_shift):
            raise UserError("the first turn cannot be a follow_up or a topic_shift (it has "
                            "no history)", file=file, line=line, case_id=cid)
        before = user
        if "user" in t.model_fields_set:
            user = t.user
        if t.filters is not None:
            filters = dict(t.filters)
        changed = k > 1 and _who(before) != _who(user)
        kind = ("first" if k == 1 else "follow_up" if t.follow_up
                else "topic_shift" if t.topic_shift else "continuation")
        tags = {**conv.tags, **t.tags, "conversation": conv.id, "turn": str(k),
                "turn_kind": kind}
        if changed:
            tags["permission_change"] = "yes"
        weight = t.weight if t.weight is not None else conv.weight
        fields: dict[str, Any] = {
            "id": cid, "question": t.question, "filters": filters,
            "user": user.model_dump() if user is not None else None,
            "reference_answer": t.reference_answer,
            "evidence": [e.model_dump(exclude_none=True) for e in t.evidence],
            "nuggets": [nu.model_dump() for nu in t.nuggets], "answerable": t.answerable,
            "tags": tags, "must_not_contain": [m if isinstance(m, str) else m.model_dump()
                                               for m in t.must_not_contain],
            "conversation": {"id": conv.id, "turn": k, "n_turns": n,
                             "follow_up": t.follow_up, "topic_shift": t.topic_shift,
                             "permission_change": changed, "history": list(history)}}
        if weight is not None:
            fields["weight"] = weight
        try:
            cases.append(Case.model_validate(fields))
        except ValidationError as e:
            raise UserError(describe_validation_error(e, Case), file=file, line=line,
                            case_id=cid) from None
        if k < n:
            if not (t.reference_answer and t.reference_answer.strip()):
                raise UserError("every turn but the last needs a reference_answer (the "
                                "history later turns are given)", file=file, line=line,
                                case_id=cid)
            history += [{"role": "user", "content": t.question},
                        {"role": "assistant", "content": t.reference_answer}]
    return cases


def asked(case: Any) -> str:
    """What a judge is told was asked: a single-turn case's question; a turn's question
    after the conversation so far as written (the earlier questions and reference
    answers, whatever history the system was given), so that "and can I change it?" is
    judged as the question it is. A single-turn case's text is the question itself, so
    its prompts (and the metric versions) are unchanged."""
    conv = getattr(case, "conversation", None)  # (any object with a question will do)
    if conv is None or not conv.history:
        return case.question
    said = "\n".join(f"{'User' if m.role == 'user' else 'Assistant'}: {m.content}"
                     for m in conv.history)
    return f"(the conversation so far)\n{said}\n(the question now)\n{case.question}"


def parse_case(obj: dict[str, Any], *, file: str, line: int) -> Case:
    """A single-turn case line (``conversation`` is raglab's, for a conversation's turns)."""
    from raglab.data.io import parse_model

    if "conversation" in obj:
        raise UserError("field 'conversation' is set by raglab on a conversation's turns: "
                        "write the conversation as one line with 'turns'", file=file,
                        line=line, case_id=obj.get("id") if isinstance(obj.get("id"), str)
                        else None)
    return parse_model(Case, obj, file=file, line=line)


def case_objects(path: Any, wanted: set[str], *,
                 history: bool = False) -> dict[str, dict[str, Any]]:
    """The cases of ``wanted`` ids in a cases file as JSON objects: a single-turn case's as
    written, a conversation's turn as its case (without its place in the conversation,
    which its tags keep; ``history``: with its frozen history as ``history``)."""
    from raglab.data.io import iter_json_lines

    out: dict[str, dict[str, Any]] = {}
    for lineno, obj in iter_json_lines(path, "cases file"):
        if is_conversation(obj):
            n = len(obj["turns"]) if isinstance(obj.get("turns"), list) else 0
            if isinstance(obj.get("id"), str) and \
                    any(turn_id(obj["id"], k) in wanted for k in range(1, n + 1)):
                for case in flatten(obj, file=str(path), line=lineno):
                    if case.id in wanted:
                        out[case.id] = case.model_dump(mode="json", exclude={"conversation"})
                        if history and case.conversation is not None:
                            out[case.id]["history"] = [m.model_dump()
                                                       for m in case.conversation.history]
        elif obj.get("id") in wanted:
            out[obj["id"]] = obj
    return out


def conversation_lines(path: Any, wanted: set[str]) -> dict[str, dict[str, Any]]:
    """The conversation lines of a cases file whose ids are in ``wanted``, as written."""
    from raglab.data.io import iter_json_lines

    return {obj["id"]: obj for _, obj in iter_json_lines(path, "cases file")
            if is_conversation(obj) and obj.get("id") in wanted
            and isinstance(obj.get("turns"), list)}


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    return "a string" if isinstance(value, str) else "a list"


def _who(user: User | None) -> tuple[str, frozenset[str]] | None:
    """A user as permissions see them (the order of the groups does not matter)."""
    return None if user is None else (user.id, frozenset(user.groups))


def _check_tag(key: str, file: str, line: int, case_id: str) -> None:
    if key in TURN_TAGS:
        raise UserError(f"tag key {key!r} is reserved in a conversation (raglab sets it "
                        f"on every turn: {', '.join(TURN_TAGS)})", file=file, line=line,
                        case_id=case_id)


def own_history(case: Case, answers: dict[str, str | None]) -> list[dict[str, str]]:
    """The history of a turn with the system's own earlier answers (``answers``: case id ->
    the answer this run recorded, None when the turn failed); an earlier turn that is not
    in ``answers`` (quarantined, not run) keeps its reference answer."""
    conv = case.conversation
    assert conv is not None
    out: list[dict[str, str]] = []
    for j, m in enumerate(conv.history):
        if m.role == "assistant":
            prior = turn_id(conv.id, j // 2 + 1)
            out.append({"role": "assistant",
                        "content": (answers[prior] or "") if prior in answers else m.content})
        else:
            out.append(m.model_dump())
    return out
