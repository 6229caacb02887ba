"""A case's expectations and feedback assessments, as MLflow entities, for its trace
(:mod:`raglab.tracking.traces`).

- expectations (source HUMAN, the case set): ``expected_response``, ``expected_facts``,
  ``expected_retrieved_context``;
- feedback: one per headline per-case metric (every one with ``tracking.assessments=all``),
  named as the metric (:func:`feedback_name`), with its source and, where the grader's
  verdicts give evidence, that evidence as its rationale. A score (a share, a rank, a
  latency) is logged as its number. A pass/fail check (a metric of kind ``binary``:
  ``acl_leak_rate``, ``must_not_contain_rate``, ``secret_leak_rate``, ``false_answer_rate``,
  ``all_vital_present``, ...) is logged as a boolean, True when the case passed it, whichever
  the metric's direction: MLflow's UI shows True green and False red, so a leak is never
  shown green; the metric's own value (1 for a leak) is in the metadata
  (``raglab.value``) and a failure's rationale says what failed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from raglab.secrets import clip

MAX_RATIONALE = 4000
#: the assessment names MLflow's UI (3.17) keeps for its built-in judges: it takes any
#: feedback so named for a pass/fail judgement, and shows the numeric values of one as text
#: ("STRING, 2 values"), so a metric of one of these names is logged as ``raglab.NAME``
MLFLOW_JUDGE_NAMES = frozenset({
    "overall_assessment", "correctness", "groundedness", "retrieval_groundedness",
    "context_sufficiency", "retrieval_sufficiency", "relevance_to_query", "safety",
    "chunk_relevance", "retrieval_relevance", "guideline_adherence", "guidelines",
    "global_guideline_adherence", "conversational_guidelines"})
RESERVED_PREFIX = "raglab."


def feedback_name(metric: str) -> str:
    """The feedback assessment's name of a per-case metric: the metric's name, or
    ``raglab.<name>`` for a name MLflow keeps for a built-in judge (``raglab.correctness``)."""
    return RESERVED_PREFIX + metric if metric in MLFLOW_JUDGE_NAMES else metric


def passed(spec: Any, value: Any) -> bool | None:
    """Whether a case passed a pass/fail check (a ``binary`` metric with a direction):
    a lower-is-better one at 0, a higher-is-better one at 1 (a mean over repeats passes
    only when every repeat did); None for any other metric or value."""
    if spec is None or spec.kind != "binary" or spec.direction == "none" \
            or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value >= 1.0 if spec.higher_is_better else value <= 0.0


def fails_a_case(spec: Any) -> bool:
    """Whether failing pass/fail check ``spec`` fails the case (its trace's state): a harm
    (a lower-is-better check: a leak, a forbidden string, a false answer or refusal, an
    error) or a missing vital nugget; not a retrieval cutoff's share (``all_evidence@1``,
    ``hit_rate@5``), which a case with perfect retrieval misses when it has more gold
    evidence than the cutoff."""
    return spec is not None and (spec.family != "retrieval" or not spec.higher_is_better)


def failed_checks(metrics: Mapping[str, Any]) -> list[str]:
    """The pass/fail checks that fail the case (:func:`fails_a_case`) it failed, in the
    record's order."""
    from raglab.metrics.catalog import spec_of

    return [n for n, v in metrics.items() if v is not None
            and fails_a_case(spec := spec_of(n)) and passed(spec, v) is False]


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def expectations(case: Any, trace_id: str, dataset_name: str) -> list[Any]:
    """The case's reference answer, nuggets and gold evidence as MLflow expectations (their
    text scrubbed of known secrets, as every sink's)."""
    from mlflow.entities import AssessmentSource, Expectation

    from raglab.secrets import scrub_obj

    if case is None:
        return []
    source = AssessmentSource(source_type="HUMAN", source_id=f"cases:{dataset_name}")
    out = []
    if case.reference_answer:
        out.append(Expectation("expected_response", scrub_obj(case.reference_answer),
                               source=source, trace_id=trace_id))
    if case.nuggets:
        out.append(Expectation("expected_facts", scrub_obj([n.text for n in case.nuggets]),
                               source=source, trace_id=trace_id,
                               metadata={"vital": _dump([n.vital for n in case.nuggets])}))
    if case.evidence:
        out.append(Expectation(
            "expected_retrieved_context",
            scrub_obj([{"doc_uri": e.doc_id, "content": e.quote, "start": e.start,
                        "end": e.end, "grade": e.grade} for e in case.evidence]),
            source=source, trace_id=trace_id))
    return out


def _rationale(verdicts: list[Any], family: str) -> str | None:
    lines = []
    for v in verdicts:
        if v.family != family or not v.evidence:
            continue
        head = f"{v.label.value if hasattr(v.label, 'value') else v.label}: " if v.label else ""
        item = f"{v.item} <- " if v.item else ""
        lines.append(f"- {head}{item}{v.evidence}")
    return clip("\n".join(lines), MAX_RATIONALE) if lines else None  # scrubbed, then cut


class Assessor:
    """Which per-case metrics become feedback, and each one's source."""

    def __init__(self, versions: Mapping[str, str], grader: str, llm_judge: bool,
                 assessments: str = "headline"):
        from raglab.metrics.catalog import HEADLINE

        self.versions = dict(versions)
        self.grader = grader
        self.judge_type = "LLM_JUDGE" if llm_judge else "CODE"
        self.headline = None if assessments == "all" else set(HEADLINE)
        self._sources: dict[tuple[str, str], Any] = {}

    def _source(self, family: str | None, graded: bool, grader: str):
        from mlflow.entities import AssessmentSource

        fam = family or "operational"
        key = (fam, grader if graded else "")
        src = self._sources.get(key)
        if src is None:
            ver = self.versions.get(fam, "")
            if graded:
                src = AssessmentSource(source_type=self.judge_type, source_id=f"{grader}@{ver}")
            else:
                src = AssessmentSource(source_type="CODE", source_id=f"raglab.{fam}@{ver}")
            self._sources[key] = src
        return src

    def feedback(self, record: Any, trace_id: str) -> list[Any]:
        from mlflow.entities import Feedback

        from raglab.metrics.catalog import spec_of

        out = []
        graders = {v.family: v.grader for v in record.verdicts}
        for name, value in record.metrics.items():
            if value is None or (self.headline is not None and name not in self.headline):
                continue
            spec = spec_of(name)
            family = spec.family if spec is not None else None
            graded = bool(spec is not None and spec.judged and family in graders)
            meta = {"raglab.family": family or "operational"}
            if family and self.versions.get(family):
                meta["raglab.metric_version"] = self.versions[family]
            rationale = _rationale(record.verdicts, family) if graded and family else None
            ok = passed(spec, value)
            if ok is not None:  # a pass/fail check: True when passed (green), False red
                meta["raglab.value"] = _dump(value)
                if not ok:
                    rationale = _failure(spec, value, record, rationale)
            out.append(Feedback(
                name=feedback_name(name), value=float(value) if ok is None else ok,
                trace_id=trace_id, metadata=meta,
                source=self._source(family, graded, graders.get(family or "", self.grader)),
                rationale=rationale))
        return out


def _failure(spec: Any, value: Any, record: Any, rationale: str | None) -> str:
    """A failed check's rationale: what the metric counts, its value, the leaks it found (an
    ACL leak's documents and ranks), then the grader's evidence, if any."""
    lines = [f"FAILED: {spec.meaning} ({spec.name} = {value:g})"]
    # the severity-one findings of the check's kind (an ACL leak: kind acl_leak)
    lines += [f"- {leak.get('doc_id')}: rank {leak.get('rank')} of the {leak.get('stage')}"
              for leak in record.severity_one or ()
              if spec.name.startswith(str(leak.get("kind")))]
    if record.error and spec.family is None:  # the operational check: the case's error
        lines.append(f"- {record.error}")
    if rationale:
        lines.append(rationale)
    return clip("\n".join(lines), MAX_RATIONALE)

