"""One line of ``records.jsonl``: the :class:`CaseRecord` written by the runner and read by
every reader (resume, aggregation, reports, comparisons).

A record keeps the case's gold summary, the system output, which hits hold which evidence
(``judgments``), the grader verdicts, the per-case metric values (``null`` where one does
not apply) and the error, if any. Optional fields (``severity_one``,
``n_factual_sentences``, ``contradicted_claims``, ``grading_cost_usd``, and with
``grader.repeats`` > 1 ``repeat_verdicts``, ``repeats``, ``repeat_variance``) are present
only when they apply;
unknown fields are kept, so records from a newer raglab still read.
"""

from __future__ import annotations

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
    diagnosis: dict[str, Any] | None = None           # raglab.metrics.diagnosis; None: passed
    # grader.repeats > 1 (present then): the verdicts of repeats 1..N-1 (``verdicts`` holds
    # repeat 0's), the number of repeats, and each graded metric's variance over them
    repeat_verdicts: list[list[Verdict]] | None = None
    repeats: int | None = None
    repeat_variance: dict[str, float] | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored form (the metrics' input): the fields that were set, in order."""
        return self.model_dump(mode="json", exclude_unset=True)

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
