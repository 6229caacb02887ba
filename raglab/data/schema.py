"""The data contract (docs/data.md) as pydantic v2 models.

Unknown fields are errors: they are almost always typos. The one exception is what a
system under test returns: fields it adds to its output or to a hit are kept
(:func:`accept_output`), since a real system's answer carries its own (a trace id, a chunk
id).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from raglab.data.verdicts import CLAIM_LABELS, NUGGET_LABELS

#: the largest case weight or traffic share (raglab.data.weights): sums of them stay finite
MAX_WEIGHT = 1e12

FilterValue = str | int | float | bool | list[str | int | float | bool]


class Strict(BaseModel):
    """The one base of raglab's typed inputs (data files and config sections): an unknown
    field is an error."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


class Document(Strict):
    doc_id: str = Field(min_length=1)
    text: str
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    acl: list[str] | None = None


class User(Strict):
    id: str = Field(min_length=1)
    groups: list[str] = Field(default_factory=list)


class Evidence(Strict):
    doc_id: str = Field(min_length=1)
    quote: str | None = None
    start: StrictInt | None = Field(default=None, ge=0)
    end: StrictInt | None = Field(default=None, ge=0)
    grade: float = Field(default=1, gt=0)

    @model_validator(mode="after")
    def _quote_or_span(self) -> Evidence:
        has_span = self.start is not None or self.end is not None
        if has_span and (self.start is None or self.end is None):
            raise ValueError("evidence with a span needs both 'start' and 'end'")
        if has_span and self.end <= self.start:  # type: ignore[operator]
            raise ValueError("evidence 'end' must be greater than 'start'")
        if not has_span and not (self.quote and self.quote.strip()):
            raise ValueError("evidence needs a non-empty 'quote' or a 'start'/'end' span")
        return self


class Nugget(Strict):
    text: str = Field(min_length=1)
    vital: StrictBool = False
    # in a conversation's turn: the (1-based) earlier turn at which the user stated this
    # fact, which the answer must use (knowledge retention; docs/conversations.md)
    from_turn: StrictInt | None = Field(default=None, ge=1, exclude_if=lambda v: v is None)


MustNotContainKind = Literal["injection", "outdated", "secret", "distractor"]
MUST_NOT_CONTAIN_KINDS: tuple[str, ...] = ("injection", "outdated", "secret", "distractor")


class Forbidden(Strict):
    """A ``must_not_contain`` entry with its kind: an injected instruction's marker, an
    outdated value, a secret, or a distractor (a plausible wrong answer)."""

    text: str = Field(min_length=1)
    kind: MustNotContainKind | None = None

    @field_validator("text")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("a must_not_contain text must not be blank")
        return v


class Message(Strict):
    """One message of a conversation's history (OpenAI style)."""

    role: Literal["user", "assistant"]
    content: str


class Turn(Strict):
    """Where a case sits in a conversation (raglab.data.conversation): the turn ``turn`` of
    ``n_turns``, how it is marked, and the frozen history before it (the earlier turns'
    questions and reference answers)."""

    id: str = Field(min_length=1)
    turn: StrictInt = Field(ge=1)
    n_turns: StrictInt = Field(ge=1)
    follow_up: StrictBool = False
    topic_shift: StrictBool = False
    permission_change: StrictBool = False
    history: list[Message] = Field(default_factory=list)


class Case(Strict):
    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    filters: dict[str, FilterValue] = Field(default_factory=dict)
    user: User | None = None
    reference_answer: str | None = None
    evidence: list[Evidence] = Field(default_factory=list)
    nuggets: list[Nugget] = Field(default_factory=list)
    answerable: StrictBool = True
    tags: dict[str, str] = Field(default_factory=dict)
    # how much the case counts in every mean and paired statistic (raglab.data.weights)
    weight: float = Field(1.0, ge=0, le=MAX_WEIGHT, allow_inf_nan=False)
    # plain strings, or {"text": ..., "kind": ...} objects (Forbidden)
    must_not_contain: list[str | Forbidden] = Field(default_factory=list)
    # set on a conversation's turns only (left out of a single-turn case's dump)
    conversation: Turn | None = Field(default=None, exclude_if=lambda v: v is None)

    @field_validator("question")
    @classmethod
    def _question_has_text(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("question is only whitespace")
        return v

    @field_validator("tags")
    @classmethod
    def _tag_keys(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if key == "answerable":
                raise ValueError("tag key 'answerable' is reserved (it is the case's own field)")
        return v

    @model_validator(mode="after")
    def _retained_facts(self) -> Case:
        for i, n in enumerate(self.nuggets):
            if n.from_turn is None:
                continue
            if self.conversation is None:
                raise ValueError(f"nuggets[{i}].from_turn: only a conversation's turn can use "
                                 "a fact from an earlier turn")
            if n.from_turn >= self.conversation.turn:
                raise ValueError(f"nuggets[{i}].from_turn={n.from_turn} is not an earlier turn "
                                 f"(this is turn {self.conversation.turn})")
        return self


#: the largest latency (ms) or usage figure a system output may report
MAX_FIGURE = 1e12


class Hit(Strict):
    """One retrieved item: a chunk (with offsets) or a whole document."""

    doc_id: str = Field(min_length=1)
    text: str = ""
    score: float | None = None
    start: StrictInt | None = Field(default=None, ge=0)
    end: StrictInt | None = Field(default=None, ge=0)
    metadata: dict[str, Any] | None = None


_start, _end = operator.attrgetter("start"), operator.attrgetter("end")


def forward_spans(hits: list[Hit]) -> list[Hit]:
    """A list of hits whose spans are forward ranges (end >= start where both are given),
    checked once per list, not hit by hit (a Python call per hit was a sixth of a replayed
    line's validation). A reversed span is a ``reversed_span`` error of the list, its
    ``hit`` (1-based) in the error's context."""
    try:
        if all(map(operator.le, map(_start, hits), map(_end, hits))):
            return hits
    except TypeError:  # a hit without a span (None): hit by hit
        pass
    for rank, h in enumerate(hits, start=1):
        if h.start is not None and h.end is not None and h.end < h.start:
            raise PydanticCustomError(
                "reversed_span", "hit {hit}: span {start}-{end} is reversed (end < start)",
                {"hit": rank, "start": h.start, "end": h.end})
    return hits


class Citation(Strict):
    sentence: StrictInt = Field(ge=0)
    context: list[Annotated[StrictInt, Field(ge=0)]] = Field(default_factory=list)


class SystemOutput(Strict):
    # a system's output may echo a secret: its validation messages never quote a value
    # (pydantic would keep a part of a long one, which scrubbing cannot recognise)
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False,
                              hide_input_in_errors=True)

    case_id: str = Field(min_length=1)
    candidates: list[Hit] = Field(default_factory=list)
    context: list[Hit] = Field(default_factory=list)
    answer: str | None = None
    citations: list[Citation] = Field(default_factory=list)
    # milliseconds, and token counts or dollars: never negative, at most MAX_FIGURE (so
    # sums and differences over a run stay finite)
    latency_ms: dict[str, Annotated[float, Field(ge=0, le=MAX_FIGURE)]] = Field(
        default_factory=dict)
    usage: dict[str, Annotated[float, Field(ge=0, le=MAX_FIGURE)]] = Field(default_factory=dict)
    # the model the system answered with (optional; compared with the grader's model: a
    # judge grading its own model's answers is reported as self-graded). Left out of the
    # record when not given, so outputs without it keep their exact form.
    model: str | None = Field(default=None, min_length=1, exclude_if=lambda v: v is None)
    # fields a system added that the contract does not name (a trace id, a request id),
    # kept in the record as given; left out when there are none (see accept_output)
    extra: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)

    _forward_spans = field_validator("candidates", "context")(staticmethod(forward_spans))

    @model_validator(mode="after")
    def _citations_in_context(self) -> SystemOutput:
        n = len(self.context)
        for i, c in enumerate(self.citations):
            for j, p in enumerate(c.context):
                if p >= n:
                    raise ValueError(f"citations[{i}].context[{j}] cites passage {p}, but the "
                                     f"context has {n} passage(s) (0-based indexes)")
        return self


_HIT_FIELDS = frozenset(Hit.model_fields)
_OUTPUT_FIELDS = frozenset(SystemOutput.model_fields)


class ContractError(ValueError):
    """An output whose added fields contradict the contract (the case fails)."""


def _move(extras: dict[str, Any], into: dict[str, Any], owner: str, container: str) -> None:
    for key, value in extras.items():
        if key in into and into[key] != value:
            raise ContractError(f"{owner} field {key!r} is also in its {container!r}, with "
                                "another value")
        into[key] = value


def accept_output(data: dict[str, Any]) -> tuple[SystemOutput, list[str]]:
    """A system's output with the fields it added kept, and their names.

    The contract's fields are validated as always (a wrong type, a missing ``case_id``, a
    reversed span is refused). A key the contract does not name is kept, not refused: on a
    hit it goes into the hit's ``metadata``, on the output into ``extra``; the names come
    back as ``trace_id`` and ``candidates[].chunk_id``. Refused (ContractError): an added
    key that is also in the hit's ``metadata`` (or the output's ``extra``) with another
    value. Outputs without added fields take the strict path unchanged (no copy)."""
    try:
        return SystemOutput.model_validate(data), []
    except Exception as e:  # noqa: BLE001 - a ValidationError: see whether fields were added
        from pydantic import ValidationError

        if not isinstance(e, ValidationError) or not any(
                err["type"] == "extra_forbidden" for err in e.errors()):
            raise
    added: set[str] = set()
    fixed = dict(data)
    extras = {k: v for k, v in data.items() if k not in _OUTPUT_FIELDS}
    if extras:
        for k in extras:
            del fixed[k]
        kept = fixed.get("extra")
        if kept is not None and not isinstance(kept, dict):
            raise ContractError("output field 'extra' must be an object")
        kept = dict(kept or {})
        _move(extras, kept, "output", "extra")
        fixed["extra"] = kept
        added.update(extras)
    for stage in ("candidates", "context"):
        hits = data.get(stage)
        if not isinstance(hits, list):
            continue
        new_hits = []
        for hit in hits:
            if isinstance(hit, dict) and not hit.keys() <= _HIT_FIELDS:
                more = {k: v for k, v in hit.items() if k not in _HIT_FIELDS}
                hit = {k: v for k, v in hit.items() if k in _HIT_FIELDS}
                meta = hit.get("metadata")
                if meta is not None and not isinstance(meta, dict):
                    raise ContractError(f"{stage} hit field 'metadata' must be an object")
                meta = dict(meta or {})
                _move(more, meta, f"{stage} hit", "metadata")
                hit["metadata"] = meta
                added.update(f"{stage}[].{k}" for k in more)
            new_hits.append(hit)
        fixed[stage] = new_hits
    return SystemOutput.model_validate(fixed), sorted(added)


class HumanLabel(Strict):
    case_id: str = Field(min_length=1)
    kind: Literal["claim", "nugget"]
    answer: str
    item: str = Field(min_length=1)
    context: list[str] = Field(default_factory=list)
    label: str

    @model_validator(mode="after")
    def _label_fits_kind(self) -> HumanLabel:
        valid = CLAIM_LABELS if self.kind == "claim" else NUGGET_LABELS
        if self.label not in valid:
            raise ValueError(f"label {self.label!r} is not valid for kind {self.kind!r} "
                             f"(valid: {', '.join(valid)})")
        return self


def may_see(acl: list[str] | None, user: User | None) -> bool:
    """Whether ``user`` may see a document with ``acl`` (None: everyone; no user: anonymous)."""
    if acl is None:
        return True
    if user is None:
        return False
    return bool(set(acl) & set(user.groups))


def matches_filters(metadata: dict[str, Any] | None, filters: dict[str, Any]) -> bool:
    """Whether a document's metadata has the same value for every filter key."""
    if not filters:
        return True
    md = metadata or {}
    for key, want in filters.items():
        if key not in md:
            return False
        have = md[key]
        if isinstance(want, list):
            if have not in want:
                return False
        elif have != want:
            return False
    return True
