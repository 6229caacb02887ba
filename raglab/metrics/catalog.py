"""Every metric raglab reports, collected from the declarations next to the code that
computes it (``DECLARED`` of raglab.metrics.retrieval, generation, operational,
aggregate and conversation; :class:`MetricSpec` says what a declaration holds), and every
list of metric names derived from them: the headline set, the families and their order,
the flip metrics, the metrics the monitor judges. The run summary, the run report, the MLflow
headline set, the manual's metric tables (generated from it), compare/decide, calibration
and the monitor all read these.
"""

from __future__ import annotations

import re
from functools import lru_cache

from raglab.metrics import aggregate, conversation, generation, operational, retrieval
from raglab.metrics.declaration import STAGES, Direction, Kind, MetricSpec

__all__ = ["CALIBRATED_BY", "CONVERSATION_METRICS", "FAMILIES", "FLIP_THRESHOLDS",
           "GRADED_FAMILIES", "HEADLINE", "METRICS", "MONITORED", "PERCENTILES", "STAGES",
           "SWEEP_TERMINAL", "Direction", "Kind", "MetricSpec", "family_of", "run_metrics",
           "spec_of", "split_cutoff", "stage_metric_names"]

_DECLARED: tuple[MetricSpec, ...] = (*retrieval.DECLARED, *generation.DECLARED,
                                     *operational.DECLARED, *aggregate.DECLARED,
                                     *conversation.DECLARED)

METRICS: dict[str, MetricSpec] = {m.name: m for m in _DECLARED}
assert len(METRICS) == len(_DECLARED), "a metric is declared twice"
#: percentiles of the latencies reported in ``metrics.json`` overall (``latency_ms.total.p95``)
PERCENTILES = tuple(aggregate.PERCENTILES)
_AT_K = re.compile(r"^(?P<base>.+)@(?P<k>\d+)$")


def _ranked(rank: str) -> tuple[str, ...]:
    ranked = sorted((getattr(m, rank), m.name) for m in _DECLARED
                    if getattr(m, rank) is not None)
    ranks = [r for r, _ in ranked]
    assert len(set(ranks)) == len(ranks), f"two metrics share a {rank} rank: {ranked}"
    return tuple(n for _, n in ranked)


#: headline metrics in display order (summary, report, MLflow, compare's terminal table)
HEADLINE: tuple[str, ...] = _ranked("headline")

#: the flip metrics, in their order, each with its default pass threshold (compare lists
#: the cases whose pass/fail flipped; ``compare.flip_thresholds`` overrides a threshold)
FLIP_THRESHOLDS: dict[str, float] = {n: METRICS[n].flip_threshold  # type: ignore[misc]
                                     for n in _ranked("flip")}

#: the figures of a sweep comparison's terminal table: the headline metrics with a flip
#: (pass/fail) threshold, in headline order
SWEEP_TERMINAL: tuple[str, ...] = tuple(n for n in HEADLINE if n in FLIP_THRESHOLDS)

#: the judged metrics of each ``raglab monitor`` window, in declaration order
MONITORED: tuple[str, ...] = tuple(m.name for m in _DECLARED if "monitor" in m.reported_by)

#: metric families in the order of ``metric_versions`` (first declaration first): the
#: families of per-case (and per-window) metrics; the conversation family's version is in
#: metrics.json's ``conversations`` section, which only runs with conversations have
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(
    m.family for m in _DECLARED if m.family is not None and m.reported_by != ("conversations",)))

#: the metrics one run with conversations reports once (raglab.metrics.conversation)
CONVERSATION_METRICS: tuple[str, ...] = tuple(m.name for m in _DECLARED
                                              if "conversations" in m.reported_by)

#: families whose values come from grader verdicts (retrieval and operational ones do not)
GRADED_FAMILIES: tuple[str, ...] = tuple(
    f for f in FAMILIES if any(m.judged for m in _DECLARED if m.family == f))


def _calibrated_by() -> dict[str, str]:
    """family -> the calibration section whose human labels measure its verdicts: the
    families judged on claims (``claims``) or nuggets (``nuggets``), the kinds of item a
    labels file holds."""
    out: dict[str, str] = {}
    for m in _DECLARED:
        if m.family in FAMILIES and m.judged in ("claim", "nugget"):
            out.setdefault(m.family, m.judged + "s")
    return out


CALIBRATED_BY: dict[str, str] = _calibrated_by()


def run_metrics() -> tuple[MetricSpec, ...]:
    """The declarations a run reports, in declaration order."""
    return tuple(m for m in _DECLARED if "run" in m.reported_by)


def split_cutoff(name: str) -> tuple[str, int | None]:
    """``"final.ndcg@5"`` -> ``("final.ndcg", 5)``; a name without a cutoff -> ``(name, None)``."""
    m = _AT_K.match(name)
    return (m.group("base"), int(m.group("k"))) if m else (name, None)


#: declarations whose name holds ``*`` (any stage), the most specific pattern first
_PATTERNS: list[tuple[re.Pattern[str], MetricSpec]] = sorted(
    ((re.compile("^" + ".+".join(map(re.escape, m.name.split("*"))) + "$"), m)
     for m in _DECLARED if "*" in m.name),
    key=lambda pm: -len(pm[1].name.replace("*", "")))


@lru_cache(maxsize=8192)
def spec_of(name: str) -> MetricSpec | None:
    """The declaration of a reported metric name (``final.ndcg@5``, ``latency_ms.total``),
    or None for a name raglab does not declare."""
    base, k = split_cutoff(name)
    spec = METRICS.get(base)
    if spec is None and k is None:
        spec = next((m for p, m in _PATTERNS if p.match(base)), None)
    if spec is None:
        return None
    return spec if (k is None or spec.at_k) else None


def family_of(name: str) -> str | None:
    spec = spec_of(name)
    return spec.family if spec else None


def stage_metric_names(stage: str, cutoffs: list[int] | tuple[int, ...]) -> list[str]:
    """Every retrieval metric name of one stage: each ``@k`` metric at each cutoff, then the
    whole-list names, in the order the run writes them."""
    mine = [m for m in retrieval.RANKED_LIST if m.name.startswith(stage + ".")]
    bases = [m.name for m in mine if m.at_k]
    names = [f"{b}@{k}" for k in cutoffs for b in bases]
    names += bases
    names += [m.name for m in mine if not m.at_k]
    return names
