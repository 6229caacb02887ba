"""Every per-case metric, as one pure function of a record (docs/metrics.md)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from raglab.metrics import generation as gen
from raglab.metrics import operational as ops
from raglab.metrics.catalog import STAGES, run_metrics, stage_metric_names
from raglab.metrics.retrieval import (
    acl_leak,
    context_metrics,
    context_tokens,
    graded_context_precision,
    ranked_list_metrics,
)
from raglab.text.answers import citations_of, factual_sentences


def stage_cutoffs(cutoffs: Sequence[int], depth: int) -> list[int]:
    """Cutoffs reported for a stage: those at most its configured depth."""
    return [c for c in cutoffs if c <= depth]


def metric_names(cutoffs: Sequence[int], k: int, candidate_depth: int) -> list[str]:
    """All per-case metric names of a run, in a stable order."""
    return list(_metric_names(tuple(cutoffs), k, candidate_depth))


@functools.lru_cache(maxsize=64)
def _metric_names(cutoffs: tuple[int, ...], k: int, candidate_depth: int) -> tuple[str, ...]:
    names = stage_metric_names("candidate", stage_cutoffs(cutoffs, candidate_depth))
    names += stage_metric_names("final", stage_cutoffs(cutoffs, k))
    names += _CASE_METRICS
    return tuple(names)


# every other metric a run reports, in declaration order (``latency_ms.*`` names come from
# the stages the system reports)
_STAGE_NAMES = {n for s in STAGES for n in stage_metric_names(s, [])}
_CASE_METRICS = [m.name for m in run_metrics() if m.name not in _STAGE_NAMES
                 and "*" not in m.name]


def case_metrics(record: dict[str, Any], cutoffs: Sequence[int], k: int,
                 candidate_depth: int) -> dict[str, Any]:
    """Per-case metric values (None where a metric does not apply)."""
    m: dict[str, Any] = dict.fromkeys(_metric_names(tuple(cutoffs), k, candidate_depth))
    gold = record["gold"]
    out = record.get("output")
    m["error_rate"] = ops.error_rate(record)
    if out is None:
        return m
    judged = record["judgments"]
    grades = gold["grades"]
    # retrieval metrics apply to answerable cases with gold evidence; an unanswerable case's
    # evidence is what its user must not be shown, and feeds the leak check only
    scored = bool(grades) and gold["answerable"]
    if scored:
        m.update(ranked_list_metrics(judged["candidates"], grades,
                                     stage_cutoffs(cutoffs, candidate_depth), "candidate"))
        m.update(ranked_list_metrics(judged["context"], grades, stage_cutoffs(cutoffs, k), "final"))
        m.update(context_metrics(judged["context"]))
    m["final.context_tokens"] = context_tokens(out.get("context", []))
    m["acl_leak_rate"] = acl_leak(judged["leaks"])
    m.update(ops.latencies(out))
    m["cost_usd_per_query"] = ops.cost_usd_per_query(out)

    verdicts = record.get("verdicts") or []
    answer = out.get("answer")
    graded = bool(record.get("graded"))
    abst = gen.abstained(answer, verdicts)
    m.update(gen.abstention_metrics(abst, gold["answerable"]))
    m.update(gen.must_not_contain_metrics(answer, gold["must_not_contain"]))
    if not graded or answer is None:
        return m
    m["grading_cost_usd"] = ops.grading_cost_usd(record)
    m.update(gen.claim_metrics(verdicts, bool(abst)))
    if scored:
        m["final.context_precision_graded"] = graded_context_precision(judged["context"],
                                                                       verdicts)
    # explicit citations, else the answer's [n] markers, for every system
    citations = citations_of(out)
    n_ctx = len(out.get("context") or [])
    cited = {c["sentence"] for c in citations if any(0 <= p < n_ctx for p in c["context"])}
    m.update(gen.citation_metrics(verdicts, factual_sentences(answer), cited,
                                  bool(citations)))
    if gen.decomposition_failed(verdicts):  # the judge failed: an error, not a refusal's 0
        return m
    m["correctness"] = gen.correctness(verdicts, bool(abst), gold["answerable"],
                                       gold["has_reference"])
    m["relevance"] = gen.relevance(verdicts, bool(abst), gold["answerable"])
    m.update(gen.nugget_metrics(verdicts, gold["nuggets_vital"], gold["answerable"], bool(abst)))
    return m
