"""Failure attribution: why one case failed, as a pure function of its record.

Every record gets a ``diagnosis``: ``None`` when the case passed every check below, else
``{"primary": CAUSE, "causes": [CAUSE, ...]}``. ``causes`` lists every check that failed, in
the order of :data:`CAUSES`; ``primary`` is the first of them (the earliest stage that
failed). The checks read the record's per-case ``metrics`` (a metric that is ``None`` does
not apply and its check is skipped), its ``error`` and the thresholds of the run config's
``diagnosis`` section (:class:`DiagnosisCfg`). With ``R`` = ``candidate.evidence_recall``
and ``F`` = ``final.evidence_recall``:

1. ``error``: the system produced no output or a grader call failed (``record["error"]``).
2. ``retrieval``: ``R < min_evidence_recall``: gold evidence is not in the candidates
   (ingest, chunking, embeddings, filters).
3. ``reranking_or_k``: ``F < min_evidence_recall`` and ``F < R``: evidence that was in the
   candidates did not reach the final context (reranker, ``k``, the token budget).
4. ``false_refusal``: an answerable case was refused (``false_refusal_rate`` is 1).
5. ``hallucinated_answer``: an unanswerable case was answered (``false_answer_rate`` is 1).
6. ``generation``: the answer has unsupported or contradicted claims
   (``faithfulness < min_faithfulness`` or ``contradicted_claim_rate > max_contradicted``),
   or it contains one of the case's forbidden strings (``must_not_contain_rate`` is 1).
7. ``incomplete_answer``: the answer is faithful (``faithfulness`` applies and passes, no
   contradicted claim over the bound) and the gold evidence reached the context (``F``
   does not apply or ``F >= min_evidence_recall``), yet facts are missing: vital ones
   (``vital_nugget_recall < min_vital_nugget_recall``), or, in an answer that is wrong
   against the reference (``correctness < min_correctness``), any nugget, vital or not
   (``nugget_recall < 1``: a PARTIAL counts as missing). The evaluation guidance reads
   faithful-but-incomplete as a cautious model or a truncated context, not as the corpus.
8. ``stale_or_conflicting_corpus``: the answer is faithful, the evidence reached the
   context and the answer is complete (every nugget present: ``nugget_recall`` and
   ``vital_nugget_recall`` do not apply or pass), yet it is wrong against the reference:
   ``correctness < min_correctness``. Only when everything is high except correctness
   against the reference should a team check the corpus for stale or conflicting
   documents.
9. ``access_control``: a document the user may not see was retrieved
   (``acl_leak_rate`` is 1). Always listed when it happens, whatever else failed; it is
   the primary cause only when nothing else failed.

A case *failed* when its diagnosis is not None (:func:`failed`): the one definition of a
failed case, the run's "failed cases: N" and the cases ``raglab cases from-run`` drafts.

The thresholds are part of the ``diagnosis`` metric version
so runs diagnosed under different thresholds are not compared silently
(:func:`raglab.graders.spec.diagnosis_version`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

CAUSES: tuple[str, ...] = (
    "error", "retrieval", "reranking_or_k", "false_refusal", "hallucinated_answer",
    "generation", "incomplete_answer", "stale_or_conflicting_corpus", "access_control",
)


class DiagnosisCfg(BaseModel):
    """Thresholds that define a failed check (config section ``diagnosis``)."""

    model_config = ConfigDict(extra="forbid")

    min_evidence_recall: float = Field(1.0, ge=0, le=1, description=(
        "candidate/final evidence recall under this: `retrieval` / `reranking_or_k`"))
    min_faithfulness: float = Field(0.8, ge=0, le=1, description=(
        "faithfulness under this, or contradicted_claim_rate over max_contradicted: "
        "`generation`"))
    max_contradicted: float = Field(0.0, ge=0, le=1)
    min_correctness: float = Field(0.5, ge=0, le=1, description=(
        "correctness under this, faithful, evidence in context: "
        "`incomplete_answer` if a nugget is missing, else `stale_or_conflicting_corpus`"))
    min_vital_nugget_recall: float = Field(1.0, ge=0, le=1, description=(
        "faithful, evidence in context, vital nugget recall under this: "
        "`incomplete_answer`"))


def _below(value: Any, bound: float) -> bool:
    return value is not None and value < bound


def diagnose(record: Mapping[str, Any], cfg: DiagnosisCfg) -> dict[str, Any] | None:
    """The diagnosis of one record (module docstring): None when it passed."""
    m: Mapping[str, Any] = record.get("metrics") or {}
    found: set[str] = set()
    if record.get("error"):
        found.add("error")
    r, f = m.get("candidate.evidence_recall"), m.get("final.evidence_recall")
    thr = cfg.min_evidence_recall
    if _below(r, thr):
        found.add("retrieval")
    if _below(f, thr) and r is not None and f < r:
        found.add("reranking_or_k")
    if m.get("false_refusal_rate") == 1:
        found.add("false_refusal")
    if m.get("false_answer_rate") == 1:
        found.add("hallucinated_answer")
    faith, contra = m.get("faithfulness"), m.get("contradicted_claim_rate")
    unfaithful = _below(faith, cfg.min_faithfulness) or (
        contra is not None and contra > cfg.max_contradicted)
    if unfaithful or m.get("must_not_contain_rate") == 1:
        found.add("generation")
    in_context = f is None or f >= thr
    if faith is not None and not unfaithful and in_context:
        wrong = _below(m.get("correctness"), cfg.min_correctness)
        if _below(m.get("vital_nugget_recall"), cfg.min_vital_nugget_recall) or (
                wrong and _below(m.get("nugget_recall"), 1.0)):
            found.add("incomplete_answer")  # cautious model or truncated context
        elif wrong:
            found.add("stale_or_conflicting_corpus")  # complete, faithful, yet wrong
    if m.get("acl_leak_rate") == 1:
        found.add("access_control")
    if not found:
        return None
    causes = [c for c in CAUSES if c in found]
    return {"primary": causes[0], "causes": causes}


def diagnosis_of(record: Mapping[str, Any], cfg: DiagnosisCfg | None = None
                 ) -> dict[str, Any] | None:
    """The record's diagnosis as the run wrote it; for a record written before diagnoses
    existed, :func:`diagnose` under ``cfg`` (default thresholds when None)."""
    if "diagnosis" in record:
        return record["diagnosis"]
    return diagnose(record, cfg or DiagnosisCfg())


def failed(record: Mapping[str, Any], cfg: DiagnosisCfg | None = None) -> bool:
    """Whether a case failed: it has a diagnosis (one check above failed)."""
    return diagnosis_of(record, cfg) is not None
