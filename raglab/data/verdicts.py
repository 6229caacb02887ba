"""The grader contract: the label sets, the :class:`Verdict` every grader judgment becomes,
and the :class:`Grader` protocol a grader backend implements.

Label sets are defined here only; the Claude grader's output schemas, the human-label
schema and the metrics all read them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from raglab.components import Grader as _Grader


class ClaimLabel(StrEnum):
    """A claim against passages (faithfulness, correctness, citations)."""

    SUPPORTED = "SUPPORTED"
    CONTRADICTED = "CONTRADICTED"
    NOT_FOUND = "NOT_FOUND"


class NuggetLabel(StrEnum):
    """Whether an answer states a nugget."""

    YES = "YES"
    PARTIAL = "PARTIAL"
    NO = "NO"


class RelevanceLabel(StrEnum):
    """The relevance rubric of an answer to its question."""

    ANSWERS_AS_ASKED = "ANSWERS_AS_ASKED"
    ADDS_UNNEEDED = "ADDS_UNNEEDED"
    DIFFERENT_QUESTION = "DIFFERENT_QUESTION"


CLAIM_LABELS: tuple[str, ...] = tuple(label.value for label in ClaimLabel)
NUGGET_LABELS: tuple[str, ...] = tuple(label.value for label in NuggetLabel)
RELEVANCE_LABELS: tuple[str, ...] = tuple(label.value for label in RelevanceLabel)

VerdictKind = Literal["decomposition", "claim", "nugget", "rubric"]
LABELS_OF_KIND: dict[str, type[StrEnum]] = {"claim": ClaimLabel, "nugget": NuggetLabel,
                                            "rubric": RelevanceLabel}


class Verdict(BaseModel):
    """One grader judgment, as stored in ``records.jsonl`` (``verdicts``).

    Every verdict names its metric family, kind, grader, the family's version and the hash
    of the prompt texts it came from; ``error`` is set (and nothing else) when the grader
    call failed after its retries. The other fields are present only where they apply:
    ``claims`` (a decomposition), ``item``/``label``/``evidence``/``index`` (a claim,
    nugget or rubric judgment), ``vital`` (a nugget), ``sentence``/``passage`` (a citation
    check: which answer sentence against which context passage).
    """

    model_config = ConfigDict(extra="allow")

    family: str
    kind: VerdictKind
    grader: str
    version: str
    prompt_hash: str
    error: str | None = None
    item: str | None = None
    label: str | None = None
    evidence: str | None = None
    index: int | None = None
    claims: list[str] | None = None
    vital: bool | None = None
    sentence: int | None = None
    passage: int | None = None

    @model_validator(mode="after")
    def _label_fits_kind(self) -> Verdict:
        if self.label is not None:
            labels = LABELS_OF_KIND.get(self.kind)
            if labels is None:
                raise ValueError(f"a {self.kind} verdict has no label")
            self.label = labels(self.label)  # ValueError when not one of the kind's labels
        return self

    def to_json(self) -> dict[str, Any]:
        """The stored form: only the fields that were given."""
        return self.model_dump(mode="json", exclude_unset=True)


#: the grader contract (defined with every group's in raglab.components)
Grader = _Grader
