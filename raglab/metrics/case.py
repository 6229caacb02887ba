"""Every per-case metric, as one pure function of a record (README "Metrics")."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from raglab.metrics import generation as gen
from raglab.metrics.catalog import METRICS, STAGES, stage_metric_names
from raglab.metrics.retrieval import context_metrics, graded_context_precision, ranked_list_metrics
from raglab.text.answers import citations_of, factual_sentences
from raglab.text.normalize import count_tokens


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


# every other metric of the catalog, in its order (``latency_ms.*`` names come from the
# stages the system reports)
_STAGE_NAMES = {n for s in STAGES for n in stage_metric_names(s, [])}
_CASE_METRICS = [n for n in METRICS if n not in _STAGE_NAMES and "*" not in n]


def case_metrics(record: dict[str, Any], cutoffs: Sequence[int], k: int,
                 candidate_depth: int) -> dict[str, Any]:
    """Per-case metric values (None where a metric does not apply)."""
    m: dict[str, Any] = dict.fromkeys(_metric_names(tuple(cutoffs), k, candidate_depth))
    gold = record["gold"]
    out = record.get("output")
    m["error_rate"] = 1.0 if record.get("error") else 0.0
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
    m["final.context_tokens"] = float(sum(count_tokens(h.get("text") or "")
                                          for h in out.get("context", [])))
    m["acl_leak_rate"] = 1.0 if judged["leaks"] else 0.0
    for stage, ms in (out.get("latency_ms") or {}).items():
        m[f"latency_ms.{stage}"] = float(ms)
    usage = out.get("usage") or {}
    if "cost_usd" in usage:
        m["cost_usd_per_query"] = float(usage["cost_usd"])

    verdicts = record.get("verdicts") or []
    answer = out.get("answer")
    graded = bool(record.get("graded"))
    abst = gen.abstained(answer, verdicts)
    m.update(gen.abstention_metrics(abst, gold["answerable"]))
    m.update(gen.must_not_contain_metrics(answer, gold["must_not_contain"]))
    if not graded or answer is None:
        return m
    m["grading_cost_usd"] = record.get("grading_cost_usd")
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
    m["correctness"] = gen.correctness(verdicts, bool(abst), gold["answerable"],
                                       gold["has_reference"])
    m["relevance"] = gen.relevance(verdicts, bool(abst), gold["answerable"])
    m.update(gen.nugget_metrics(verdicts, gold["nuggets_vital"], gold["answerable"], bool(abst)))
    return m
