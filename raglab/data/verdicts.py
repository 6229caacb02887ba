"""The grader contract: the label sets, the :class:`Verdict` every grader judgment becomes,
and the :class:`Grader` protocol a grader backend implements.

Label sets are defined here only; the Claude grader's output schemas, the human-label
schema and the metrics all read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, model_validator


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


@runtime_checkable
class Grader(Protocol):
    """A grader backend (``grader`` config group). Each judgment is asked separately, so the
    orchestrator can cache it by family version and inputs; labels come from the sets above.
    A call that fails after retries raises :class:`raglab.llm.client.LLMCallError`.

    Optional (``grader.repeats``): ``deterministic = True`` (the same inputs always get the
    same judgment: repeats are not asked) or ``for_repeat(r)``, the same grader asking as
    independent repeat ``r`` (so its own response cache keys differ by repeat)."""

    backend: str

    def prompt_texts(self) -> dict[str, str]:
        """The prompt templates by name (their texts are part of the metric versions)."""
        ...

    async def decompose(self, question: str, answer: str) -> list[str]:
        """The answer's atomic claims (none: an abstention)."""
        ...

    async def verify(self, claims: list[str], passages: list[str],
                     family: str) -> Sequence[Sequence[str | None]]:
        """``[label, evidence or None]`` per claim, a ClaimLabel against the passages."""
        ...

    async def nuggets(self, question: str, answer: str,
                      nuggets: list[str]) -> Sequence[Sequence[str | None]]:
        """``[label, evidence or None]`` per nugget, a NuggetLabel."""
        ...

    async def relevance(self, question: str, answer: str) -> Sequence[str]:
        """``[label, reason]``, a RelevanceLabel."""
        ...

    async def aclose(self) -> None:
        ...
