"""One line of ``records.jsonl``: the :class:`CaseRecord` written by the runner and read by
every reader (resume, aggregation, reports, comparisons).

A record keeps the case's gold summary, the system output, which hits hold which evidence
(``judgments``), the grader verdicts, the per-case metric values (``null`` where one does
not apply) and the error, if any. Optional fields (``severity_one``,
``n_factual_sentences``, ``contradicted_claims``, ``grading_cost_usd``, ``grading_calls``,
and with ``grader.repeats`` > 1 ``repeat_verdicts``, ``repeats``, ``repeat_variance``, and
with a model client ``model_usage``) are present only when they apply (a record written
before one existed reads as without it); unknown fields are kept, so records from a newer
raglab still read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from raglab.data.io import read_jsonl_tolerant
from raglab.data.schema import Forbidden
from raglab.data.verdicts import Verdict
from raglab.errors import UserError


class GoldSummary(BaseModel):
    """What the metrics need of the case's labels."""

    model_config = ConfigDict(extra="allow")

    answerable: bool
    grades: list[Any] = Field(default_factory=list)  # graded relevance of each evidence item
    nuggets_vital: list[bool] = Field(default_factory=list)
    has_reference: bool = False
    # plain strings or {"text", "kind"} entries, as in the case
    must_not_contain: list[str | Forbidden] = Field(default_factory=list)
    # a conversation's turn with facts the user stated earlier: each nugget's turn of origin
    # (None: the answer's own); left out when no nugget has one
    nuggets_from_turn: list[int | None] | None = Field(
        default=None, exclude_if=lambda v: v is None)


class CaseRecord(BaseModel):
    # NaN is refused on write
    model_config = ConfigDict(extra="allow", ser_json_inf_nan="constants")

    case_id: str
    tags: dict[str, Any] = Field(default_factory=dict)
    weight: float | None = None                # present when the run is weighted
    gold: GoldSummary
    output: dict[str, Any] | None = None       # the SystemOutput, as JSON
    judgments: dict[str, Any] | None = None    # candidates/context: items held; leaks
    verdicts: list[Verdict] = Field(default_factory=list)
    graded: bool = False
    metrics: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    severity_one: list[dict[str, Any]] | None = None  # ACL leaks (present when any)
    n_factual_sentences: int | None = None            # present when graded
    contradicted_claims: list[str] | None = None      # present when any
    grading_cost_usd: float | None = None             # present when graded (None: unpriced)
    # present when the grader called a model for this case: one entry per call that served
    # it (raglab.llm.client.call_info: model, tokens, cost_usd, latency_ms, cached; a call
    # that served several cases also has ``share``, the case's part, and ``served``)
    grading_calls: list[dict[str, Any]] | None = None
    diagnosis: dict[str, Any] | None = None           # raglab.metrics.diagnosis; None: passed
    # grader.repeats > 1 (present then): the verdicts of repeats 1..N-1 (``verdicts`` holds
    # repeat 0's), the number of repeats, and each graded metric's variance over them
    repeat_verdicts: list[list[Verdict]] | None = None
    repeats: int | None = None
    repeat_variance: dict[str, float] | None = None
    # present when the run has a model client: the model calls the run made since the
    # record before it was written (raglab.llm.client.USAGE_KEYS); a run's model_usage is
    # their sum, over every process that resumed it
    model_usage: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored form (the metrics' input): the fields that were set, in order."""
        return self.model_dump(mode="json", exclude_unset=True)

    def scrubbed(self, obj: dict[str, Any] | None = None) -> CaseRecord:
        """The record as every sink takes it (records, traces, assessments: DESIGN rule
        15): each string value scrubbed of the known secrets
        (:meth:`raglab.secrets.Scrubber.scrub_obj`), and a number that is one replaced,
        where the field can hold text. ``obj``: its stored form already scrubbed, when the
        caller has it. The record itself when it holds no secret."""
        from pydantic import ValidationError

        from raglab.secrets import SCRUBBER

        if obj is None:
            line = self.__pydantic_serializer__.to_json(self, exclude_unset=True)
            if not SCRUBBER.found_in(line):
                return self
            obj = SCRUBBER.scrub_obj(self.to_json())
        try:
            return type(self).model_validate(obj)
        except ValidationError:  # a number of raglab's own (a weight, a count) that is a
            # digits-only secret cannot become "***": strings are scrubbed, numbers kept
            return type(self).model_validate(SCRUBBER.scrub_obj(self.to_json(), numbers=False))

    @classmethod
    def from_json(cls, obj: dict[str, Any], *, file: str | None = None,
                  line: int | None = None) -> CaseRecord:
        from pydantic import ValidationError

        from raglab.data.io import first_problem

        try:
            return cls.model_validate(obj)
        except ValidationError as e:
            p = first_problem(e, cls)
            raise UserError(f"not a raglab record: field '{p.loc}': {p.msg}", file=file,
                            line=line, case_id=obj.get("case_id")) from None


def read_records(path: str | Path) -> list[CaseRecord]:
    """The records of a run (a torn last line, left by a kill, is dropped)."""
    return [CaseRecord.from_json(obj, file=str(path)) for obj in read_jsonl_tolerant(path)]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} (JSON allows finite numbers only)")


class RecordLines:
    """The lines of a ``records.jsonl``, streamed one at a time (a run's records can be
    larger than memory): iterating yields ``(line number, line bytes, object)`` for each
    non-blank line. A line that does not parse is dropped when it is the last one (a kill
    tore it; ``torn`` is then True, as it is for a file not ended by a line break, once the
    iteration is over); anywhere else it is a UserError naming file and line, as is a line
    that is not an object, holds NaN or Infinity, or is nested too deep for a reader."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.torn = False
        self.dropped = 0  # lines dropped (0 or 1: the torn last line)

    def __iter__(self) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
        file = str(self.path)
        self.torn, self.dropped = False, 0
        if self.path.exists() and not self.path.is_file():  # a FIFO would block the read
            raise UserError("records.jsonl exists and is not a regular file (a FIFO, a "
                            "device, a directory); raglab reads and appends records in a "
                            "regular file only", file=file)
        try:
            fh = open(self.path, "rb")
        except FileNotFoundError:
            return
        except OSError as e:
            raise UserError(f"cannot read records: {e.strerror}", file=file) from None
        pending: int | None = None  # a line that did not parse: torn, if nothing follows
        last = b""
        with fh:
            for lineno, raw in enumerate(fh, 1):
                last = raw
                if not raw.strip():
                    continue
                if pending is not None:
                    raise UserError("corrupt line (not the last one)", file=file, line=pending)
                try:
                    obj = json.loads(raw, parse_constant=_refuse_constant)
                except RecursionError:
                    raise UserError("a line nested too deep to read", file=file,
                                    line=lineno) from None
                except UnicodeDecodeError:
                    pending = lineno
                    continue
                except ValueError as e:  # JSONDecodeError is one
                    if isinstance(e, json.JSONDecodeError):
                        pending = lineno
                        continue
                    raise UserError(str(e), file=file, line=lineno,
                                    case_id=_case_id_of(raw)) from None
                if not isinstance(obj, dict):
                    raise UserError(f"expected a JSON object, got {type(obj).__name__}",
                                    file=file, line=lineno)
                yield lineno, raw, obj
        if pending is not None:
            self.dropped = 1
        self.torn = pending is not None or (bool(last) and not last.endswith(b"\n"))


def _case_id_of(raw: bytes) -> str | None:
    """The case id of a line that was refused (read leniently, only to name it)."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    cid = obj.get("case_id") if isinstance(obj, dict) else None
    return cid if isinstance(cid, str) else None


def iter_records(path: str | Path,
                 lines: RecordLines | None = None) -> Iterator[tuple[int, CaseRecord]]:
    """``(line number, record)`` of each record of a run, streamed (see :class:`RecordLines`;
    pass ``lines`` to learn afterwards whether the last line was torn)."""
    file = str(path)
    for lineno, _, obj in (lines if lines is not None else RecordLines(path)):
        yield lineno, CaseRecord.from_json(obj, file=file, line=lineno)
