"""Validating SystemOutput JSON lines fast: pydantic-core parses and checks each line into
plain dicts (no model instance per hit), defaults filled in and keys in the models' order,
so the result equals ``SystemOutput.model_validate_json(line).model_dump()``. The schema is
pydantic-core's own, mirroring :class:`SystemOutput`, :class:`Hit` and :class:`Citation`
field for field (checked at import and in tests). A line that fails is parsed again the
ordinary way, so the error names the field exactly as before. As the models do, the
mirror refuses NaN and Infinity in float fields.

The one check the mirror leaves to the runner is the models' forward-span rule
(``end >= start``), which ``raglab.runner.run.check_spans`` applies to every output.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import SchemaValidator
from pydantic_core import core_schema as cs

from raglab.data.schema import Citation, Hit, SystemOutput


def _opt(schema: Any, default: Any = None, factory: Any = None) -> Any:
    """A field that may be left out (then ``default``, or ``factory()``)."""
    if factory is not None:
        return cs.typed_dict_field(cs.with_default_schema(schema, default_factory=factory),
                                   required=False)
    return cs.typed_dict_field(cs.with_default_schema(schema, default=default), required=False)


def _req(schema: Any) -> Any:
    return cs.typed_dict_field(schema, required=True)


_FINITE = cs.float_schema(allow_inf_nan=False)
_AMOUNT = cs.float_schema(allow_inf_nan=False, ge=0)  # a latency, a token count, dollars
_OFFSET = cs.nullable_schema(cs.int_schema(ge=0, strict=True))

_HIT = cs.typed_dict_schema({
    "doc_id": _req(cs.str_schema(min_length=1)),
    "text": _opt(cs.str_schema(), ""),
    "score": _opt(cs.nullable_schema(_FINITE)),
    "start": _opt(_OFFSET),
    "end": _opt(_OFFSET),
    "metadata": _opt(cs.nullable_schema(cs.dict_schema(cs.str_schema(), cs.any_schema()))),
}, extra_behavior="forbid")

_CITATION = cs.typed_dict_schema({
    "sentence": _req(cs.int_schema(ge=0, strict=True)),
    "context": _opt(cs.list_schema(cs.int_schema(ge=0, strict=True)), factory=list),
}, extra_behavior="forbid")

_OUTPUT = cs.typed_dict_schema({
    "case_id": _req(cs.str_schema(min_length=1)),
    "candidates": _opt(cs.list_schema(_HIT), factory=list),
    "context": _opt(cs.list_schema(_HIT), factory=list),
    "answer": _opt(cs.nullable_schema(cs.str_schema())),
    "citations": _opt(cs.list_schema(_CITATION), factory=list),
    "latency_ms": _opt(cs.dict_schema(cs.str_schema(), _AMOUNT), factory=dict),
    "usage": _opt(cs.dict_schema(cs.str_schema(), _AMOUNT), factory=dict),
}, extra_behavior="forbid")

_VALIDATOR = SchemaValidator(_OUTPUT)

# the mirror describes the same fields as the models, in their order (tests check the values)
assert list(_HIT["fields"]) == list(Hit.model_fields)
assert list(_CITATION["fields"]) == list(Citation.model_fields)
assert list(_OUTPUT["fields"]) == list(SystemOutput.model_fields)


def parse_output_line(line: bytes | str) -> dict[str, Any]:
    """The validated output of one JSON line, as ``SystemOutput(...).model_dump()`` gives it;
    raises pydantic's ValidationError (or ValueError for bad JSON) when it is not one."""
    return _VALIDATOR.validate_json(line)
