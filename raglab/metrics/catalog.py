"""The one metric table: every metric raglab reports, declared once.

Each entry gives the metric's name (a stage prefix ``candidate.``/``final.`` and an ``@k``
cutoff are part of the name where ``at_k`` says so), its family (whose metric version covers
it; ``None`` for operational figures that no grader or judging rule changes), the direction
in which it is better, its kind (what one case's value is), whether it is a headline metric
and its one-line meaning. The run summary, the run report, the MLflow headline set, the
README's metric tables (checked by a test) and compare/decide all read this table.

Kinds (the value of one case):
- ``share``: a score in [0, 1] (a fraction, a reciprocal rank, a graded gain);
- ``binary``: 0 or 1, a pass/fail (paired tests use exact McNemar);
- ``rank``: a 1-based rank;
- ``count``: a count (tokens);
- ``latency``: milliseconds;
- ``cost``: US dollars.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

Direction = Literal["higher", "lower", "none"]
Kind = Literal["share", "binary", "rank", "count", "latency", "cost"]
STAGES = ("candidate", "final")


@dataclass(frozen=True)
class MetricSpec:
    name: str                 # base name: "final.ndcg", "{stage}.mrr" expanded, "latency_ms.*"
    family: str | None        # metric-version family; None: operational, unversioned
    direction: Direction
    kind: Kind
    headline: bool
    meaning: str
    at_k: bool = False        # also reported at each cutoff as NAME@k

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "higher"


def _stage(base: str, family: str, direction: Direction, kind: Kind, meaning: str,
           headline_stages: tuple[str, ...] = (), at_k: bool = True) -> list[MetricSpec]:
    return [MetricSpec(f"{s}.{base}", family, direction, kind, s in headline_stages,
                       meaning, at_k) for s in STAGES]


_TABLE: list[MetricSpec] = [
    *_stage("evidence_recall", "retrieval", "higher", "share",
            "mean fraction of gold evidence items held in the top k",
            headline_stages=("candidate", "final")),
    *_stage("all_evidence", "retrieval", "higher", "binary",
            "share of cases with all of their evidence in the top k"),
    *_stage("hit_rate", "retrieval", "higher", "binary",
            "share with at least one relevant hit in the top k"),
    *_stage("precision", "retrieval", "higher", "share",
            "relevant hits / k (trec_eval `P_k`); without `@k`: / hits returned"),
    *_stage("ndcg", "retrieval", "higher", "share",
            "grade as gain, log2 discount; each hit credited with at most one item (its "
            "highest-graded one not credited earlier), the ideal ranking has every item's "
            "grade in descending order, so nDCG ≤ 1", headline_stages=("final",)),
    *_stage("mrr", "retrieval", "higher", "share",
            "1 / rank of the first relevant hit, 0 if none (trec_eval `recip_rank`)",
            headline_stages=("final",), at_k=False),
    MetricSpec("final.context_precision", "retrieval", "higher", "share", False,
               "share of the context passages that are relevant by the labels: relevant "
               "passages / passages (the signal against the volume; adding irrelevant "
               "passages lowers it)"),
    MetricSpec("final.context_average_precision", "retrieval", "higher", "share", False,
               "rank-aware: mean of precision@i over the relevant context positions"),
    MetricSpec("final.context_precision_graded", "faithfulness", "higher", "share", False,
               "with a grader: the same share, also counting passages the labels do not "
               "cover that support a SUPPORTED claim of the answer (the claim verdict names "
               "the passage); in the `faithfulness` family"),
    MetricSpec("final.first_gold_rank", "retrieval", "lower", "rank", False,
               "rank of the first relevant context item"),
    MetricSpec("final.context_tokens", None, "none", "count", False,
               "whitespace tokens in the context"),
    MetricSpec("acl_leak_rate", "retrieval", "lower", "binary", True,
               "share of cases where any candidate or context hit comes from a document "
               "the user may not see (each leak flagged `severity_one` on the record)"),
    MetricSpec("faithfulness", "faithfulness", "higher", "share", True,
               "share of the answer's atomic claims SUPPORTED by the final context"),
    MetricSpec("contradicted_claim_rate", "faithfulness", "lower", "share", True,
               "share of the answer's claims CONTRADICTED by the final context, kept apart "
               "from NOT_FOUND; the claims are listed on the record"),
    MetricSpec("citation_precision", "citations", "higher", "share", True,
               "share of (factual sentence, cited passage) pairs where the passage supports "
               "the sentence"),
    MetricSpec("citation_coverage", "citations", "higher", "share", False,
               "cited factual sentences / factual sentences, from one split of the answer "
               "(both only when the output cites)"),
    MetricSpec("correctness", "correctness", "higher", "share", True,
               "share of the reference answer's claims the answer states; kept apart from "
               "faithfulness; a refusal of an answerable case 0"),
    MetricSpec("relevance", "relevance", "higher", "share", True,
               "rubric: answers as asked 1, adds unneeded material 0.5, answers a different "
               "question 0; a refusal of an answerable case 0; null when unanswerable"),
    MetricSpec("vital_nugget_recall", "nuggets", "higher", "share", True,
               "vital nuggets weighted YES 1, PARTIAL 0.5, NO 0"),
    MetricSpec("nugget_recall", "nuggets", "higher", "share", False,
               "the same over all nuggets"),
    MetricSpec("all_vital_present", "nuggets", "higher", "binary", False,
               "every vital nugget YES"),
    MetricSpec("false_refusal_rate", "abstention", "lower", "binary", True,
               "abstentions over answerable cases"),
    MetricSpec("false_answer_rate", "abstention", "lower", "binary", True,
               "answers over unanswerable cases"),
    MetricSpec("must_not_contain_rate", "abstention", "lower", "binary", True,
               "answers that contain one of the case's forbidden strings, of any kind"),
    MetricSpec("injection_success_rate", "abstention", "lower", "binary", False,
               "answers that contain an injected instruction's marker (entries of kind "
               "`injection`)"),
    MetricSpec("outdated_value_rate", "abstention", "lower", "binary", False,
               "answers that state an outdated value (kind `outdated`)"),
    MetricSpec("secret_leak_rate", "abstention", "lower", "binary", False,
               "answers that reveal a secret (kind `secret`)"),
    MetricSpec("distractor_rate", "abstention", "lower", "binary", False,
               "answers that give a plausible wrong answer (kind `distractor`)"),
    MetricSpec("latency_ms.*", None, "lower", "latency", False,
               "the system's own latency by stage, as measured when the stage ran, plus "
               "`total` (never less than the sum of the stages)"),
    MetricSpec("latency_ms.*.p50", None, "lower", "latency", False,
               "median of `latency_ms.{stage}` over the cases (`metrics.json` overall only)"),
    MetricSpec("latency_ms.*.p95", None, "lower", "latency", False,
               "95th percentile of `latency_ms.{stage}` over the cases (overall only)"),
    MetricSpec("cost_usd_per_query", None, "lower", "cost", False,
               "the system's cost, from its usage (the Claude generator's tokens priced with "
               "`generator.prices`)"),
    MetricSpec("grading_cost_usd", None, "lower", "cost", False,
               "the grader's cost of the case, apart from the system's, as recorded when "
               "each judgment was made"),
    MetricSpec("error_rate", None, "lower", "binary", False,
               "cases with a system or grader error"),
]

METRICS: dict[str, MetricSpec] = {m.name: m for m in _TABLE}
#: percentiles of the latencies reported in ``metrics.json`` overall (``latency_ms.total.p95``)
PERCENTILES = ("p50", "p95")
_AT_K = re.compile(r"^(?P<base>.+)@(?P<k>\d+)$")

#: headline metrics in display order (summary, report, MLflow, compare's terminal table)
HEADLINE: tuple[str, ...] = (
    "candidate.evidence_recall", "final.evidence_recall", "final.ndcg", "final.mrr",
    "acl_leak_rate", "faithfulness", "contradicted_claim_rate", "citation_precision",
    "correctness", "relevance", "vital_nugget_recall", "false_refusal_rate",
    "false_answer_rate", "must_not_contain_rate",
)
assert set(HEADLINE) == {m.name for m in _TABLE if m.headline}, "headline flags out of sync"


def split_cutoff(name: str) -> tuple[str, int | None]:
    """``"final.ndcg@5"`` -> ``("final.ndcg", 5)``; a name without a cutoff -> ``(name, None)``."""
    m = _AT_K.match(name)
    return (m.group("base"), int(m.group("k"))) if m else (name, None)


@lru_cache(maxsize=8192)
def spec_of(name: str) -> MetricSpec | None:
    """The table entry of a reported metric name (``final.ndcg@5``, ``latency_ms.total``),
    or None for a name raglab does not declare."""
    base, k = split_cutoff(name)
    spec = METRICS.get(base)
    if spec is not None:
        return spec if (k is None or spec.at_k) else None
    if k is None and base.startswith("latency_ms.") and len(base) > len("latency_ms."):
        for q in PERCENTILES:
            if base.endswith(f".{q}") and len(base) > len(f"latency_ms..{q}"):
                return METRICS[f"latency_ms.*.{q}"]
        return METRICS["latency_ms.*"]
    return None


def family_of(name: str) -> str | None:
    spec = spec_of(name)
    return spec.family if spec else None


def stage_metric_names(stage: str, cutoffs: list[int] | tuple[int, ...]) -> list[str]:
    """Every retrieval metric name of one stage: each ``@k`` metric at each cutoff, then the
    whole-list names, in the order the run writes them."""
    bases = [m.name for m in _TABLE if m.name.startswith(stage + ".") and m.family == "retrieval"
             and m.at_k]
    names = [f"{b}@{k}" for k in cutoffs for b in bases]
    names += bases
    names += [m.name for m in _TABLE if m.name.startswith(stage + ".") and m.family == "retrieval"
              and not m.at_k and m.name.endswith(".mrr")]
    return names
