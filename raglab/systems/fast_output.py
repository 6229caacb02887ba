"""Validating SystemOutput JSON lines fast: pydantic-core parses and checks each line into
plain dicts (no model instance per hit), with the defaults of :class:`SystemOutput` filled
in, so the result equals ``SystemOutput.model_validate_json(line).model_dump()``. A line that
fails is parsed again the ordinary way, so the error names the field exactly as before."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, TypeAdapter
from typing_extensions import NotRequired, TypedDict

from raglab.data.schema import Citation, Hit, SystemOutput


class _HitD(TypedDict):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]
    doc_id: Annotated[str, Field(min_length=1)]
    text: NotRequired[str]
    score: NotRequired[float | None]
    start: NotRequired[Annotated[int, Field(ge=0)] | None]
    end: NotRequired[Annotated[int, Field(ge=0)] | None]
    metadata: NotRequired[dict[str, Any] | None]


class _CitationD(TypedDict):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]
    sentence: Annotated[int, Field(ge=0)]
    context: NotRequired[list[int]]


class _OutputD(TypedDict):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]
    case_id: Annotated[str, Field(min_length=1)]
    candidates: NotRequired[list[_HitD]]
    context: NotRequired[list[_HitD]]
    answer: NotRequired[str | None]
    citations: NotRequired[list[_CitationD]]
    latency_ms: NotRequired[dict[str, float]]
    usage: NotRequired[dict[str, float]]


_ADAPTER = TypeAdapter(_OutputD)
_HIT_DEFAULTS = {"text": "", "score": None, "start": None, "end": None, "metadata": None}
_HIT_BASE = {"doc_id": "", **_HIT_DEFAULTS}
_OUT_LISTS = ("candidates", "context", "citations")

# the mirror must describe the same fields as the models (checked in tests too)
assert set(_HitD.__annotations__) == set(Hit.model_fields)
assert set(_CitationD.__annotations__) == set(Citation.model_fields)
assert set(_OutputD.__annotations__) == set(SystemOutput.model_fields)


def parse_output_line(line: bytes | str) -> dict[str, Any]:
    """The validated output of one JSON line, as ``SystemOutput(...).model_dump()`` gives it;
    raises pydantic's ValidationError (or ValueError for bad JSON) when it is not one."""
    out: dict[str, Any] = _ADAPTER.validate_json(line)
    for key in _OUT_LISTS:
        out.setdefault(key, [])
    out.setdefault("answer", None)
    out.setdefault("latency_ms", {})
    out.setdefault("usage", {})
    for key in ("candidates", "context"):  # the model's field order, defaults filled
        out[key] = [{**_HIT_BASE, **h} for h in out[key]]
    for c in out["citations"]:
        c.setdefault("context", [])
    # the model's field order
    return {k: out[k] for k in SystemOutput.model_fields}
