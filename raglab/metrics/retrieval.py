"""Retrieval metrics of one ranked list, from per-hit evidence judgments.

Definitions follow trec_eval where it has the measure: P@k divides by k; nDCG uses the
grade as gain with log2 discounting, the ideal ranking placing every item's grade in
descending order; MRR is 1/rank of the first relevant hit (0 when there is none).
For nDCG each hit is credited with at most one evidence item: the highest-graded one it
holds that no earlier hit was credited with.

The retrieval and context metrics are declared here (``DECLARED``), next to the code.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from functools import lru_cache
from itertools import compress

from raglab.metrics.declaration import MetricSpec, stage_metrics
from raglab.text.normalize import count_tokens

#: the metrics of one ranked list, per stage (``ranked_list_metrics``)
RANKED_LIST: tuple[MetricSpec, ...] = (
    *stage_metrics("evidence_recall", "retrieval", "higher", "share",
                   "mean fraction of gold evidence items held in the top k",
                   headline={"candidate": 1, "final": 2}, flip={"final": 3}),
    *stage_metrics("all_evidence", "retrieval", "higher", "binary",
                   "share of cases with all of their evidence in the top k"),
    *stage_metrics("hit_rate", "retrieval", "higher", "binary",
                   "share with at least one relevant hit in the top k"),
    *stage_metrics("precision", "retrieval", "higher", "share",
                   "relevant hits / k (trec_eval `P_k`); without `@k`: / hits returned"),
    *stage_metrics("ndcg", "retrieval", "higher", "share",
                   "grade as gain, log2 discount; each hit credited with at most one item (its "
                   "highest-graded one not credited earlier), the ideal ranking has every item's "
                   "grade in descending order, so nDCG ≤ 1", headline={"final": 3}),
    *stage_metrics("mrr", "retrieval", "higher", "share",
                   "1 / rank of the first relevant hit, 0 if none (trec_eval `recip_rank`)",
                   headline={"final": 4}, at_k=False),
)

#: metrics of the final context and of access control (``context_metrics`` and below)
CONTEXT: tuple[MetricSpec, ...] = (
    MetricSpec("final.context_precision", "retrieval", "higher", "share", None,
               "share of the context passages that are relevant by the labels: relevant "
               "passages / passages (the signal against the volume; adding irrelevant "
               "passages lowers it)"),
    MetricSpec("final.context_average_precision", "retrieval", "higher", "share", None,
               "rank-aware: mean of precision@i over the relevant context positions"),
    MetricSpec("final.context_precision_graded", "faithfulness", "higher", "share", None,
               "with a grader: the same share, also counting passages the labels do not "
               "cover that support a SUPPORTED claim of the answer (the claim verdict names "
               "the passage); in the `faithfulness` family", judged="claim"),
    MetricSpec("final.first_gold_rank", "retrieval", "lower", "rank", None,
               "rank of the first relevant context item"),
    MetricSpec("final.context_tokens", None, "none", "count", None,
               "whitespace tokens in the context"),
    MetricSpec("acl_leak_rate", "retrieval", "lower", "binary", 5,
               "share of cases where any candidate or context hit comes from a document "
               "the user may not see (each leak flagged `severity_one` on the record)"),
)

DECLARED: tuple[MetricSpec, ...] = (*RANKED_LIST, *CONTEXT)

#: the base names (no stage) reported at each cutoff, in their order
_AT_K_BASES = tuple(dict.fromkeys(m.name.split(".", 1)[1] for m in RANKED_LIST if m.at_k))

_LOG2 = [1.0 / math.log2(r + 2) for r in range(1024)]


def _disc(r: int) -> float:
    return _LOG2[r] if r < len(_LOG2) else 1.0 / math.log2(r + 2)


def ranked_list_metrics(holds: Sequence[Sequence[int]], grades: Sequence[float],
                        cutoffs: Sequence[int], prefix: str,
                        relevant: Sequence[int] | None = None) -> dict[str, float]:
    """All retrieval metrics of one stage for a case with gold evidence (``grades`` non-empty).

    ``holds[r]`` lists the evidence items the hit at rank r (0-based) holds; ``relevant``,
    when given, lists the ranks whose ``holds`` are non-empty (ascending), so the work is
    proportional to the number of relevant hits, not the depth of the list.
    """
    n_ev = len(grades)
    n = len(holds)
    # Sparse pass over relevant hits: rank, distinct items found so far, credited gain.
    ranks: list[int] = []
    found_after: list[int] = []
    dcg_after: list[float] = []
    credited: set[int] = set()
    seen: set[int] = set()
    dcg = 0.0
    for r in compress(range(n), holds) if relevant is None else relevant:
        best = -1
        for i in holds[r]:
            seen.add(i)
            if i not in credited and (best < 0 or grades[i] > grades[best]):
                best = i
        if best >= 0:
            credited.add(best)
            dcg += grades[best] * _disc(r)
        ranks.append(r)
        found_after.append(len(seen))
        dcg_after.append(dcg)
    ideal_cum = _ideal_dcg(tuple(grades))
    out: dict[str, float] = {}
    for k, keys in _keys(prefix, tuple(cutoffs)):
        kk = n if k is None else min(k, n)
        denom = n if k is None else k
        j = bisect_left(ranks, kk)  # relevant hits within the first kk
        found = found_after[j - 1] if j else 0
        depth = n_ev if k is None else min(k, n_ev)
        idcg = ideal_cum[depth - 1] if depth else 0.0
        value = {"evidence_recall": found / n_ev,
                 "all_evidence": 1.0 if found == n_ev else 0.0,
                 "hit_rate": 1.0 if j else 0.0,
                 "precision": j / denom if denom > 0 else 0.0,
                 "ndcg": (dcg_after[j - 1] if j else 0.0) / idcg if idcg > 0 else 0.0}
        for base, key in keys:
            out[key] = value[base]
    out[prefix + ".mrr"] = 1.0 / (ranks[0] + 1) if ranks else 0.0
    return out


@lru_cache(maxsize=4096)
def _ideal_dcg(grades: tuple[float, ...]) -> list[float]:
    """Cumulative DCG of the ideal ranking (every item's grade, descending)."""
    out, acc = [], 0.0
    for r, gr in enumerate(sorted(grades, reverse=True)):
        acc += gr * _disc(r)
        out.append(acc)
    return out


@lru_cache(maxsize=64)
def _keys(prefix: str, cutoffs: tuple[int, ...]
          ) -> list[tuple[int | None, tuple[tuple[str, str], ...]]]:
    """For each cutoff (then None, the whole list): ``(base, reported name)`` of every
    declared ``@k`` metric."""
    out = []
    for k in [*cutoffs, None]:
        suffix = "" if k is None else f"@{k}"
        out.append((k, tuple((b, f"{prefix}.{b}{suffix}") for b in _AT_K_BASES)))
    return out


def context_metrics(holds: Sequence[Sequence[int]]) -> dict[str, float | None]:
    """Context metrics by the labels:

    - ``final.context_precision``: relevant context passages / context passages (the signal
      against the volume; 0 for an empty context);
    - ``final.context_average_precision``: rank-aware, the mean of precision@i over the
      relevant positions (0 when no passage is relevant);
    - ``final.first_gold_rank``: 1-based rank of the first relevant passage (None if none).
    """
    rel = 0
    acc = 0.0
    first = None
    for r, held in enumerate(holds):
        if held:
            rel += 1
            acc += rel / (r + 1)
            if first is None:
                first = r + 1
    return {"final.context_precision": rel / len(holds) if holds else 0.0,
            "final.context_average_precision": acc / rel if rel else 0.0,
            "final.first_gold_rank": first}


def graded_context_precision(holds: Sequence[Sequence[int]],
                             verdicts: Sequence[dict]) -> float | None:
    """``final.context_precision_graded``: the share of context passages that are relevant by
    the labels or support a SUPPORTED claim of the answer (the claim verdict's ``passage``).

    None when a supported claim's verdict does not say which passage supported it, or the
    claim judging failed; an answer without claims leaves the labels alone to decide.
    """
    supported: set[int] = set()
    for v in verdicts:
        if v.get("family") != "faithfulness":
            continue
        if v.get("error"):
            return None
        if v.get("kind") == "claim" and v.get("label") == "SUPPORTED":
            if "passage" not in v:
                return None
            if v["passage"] is not None:
                supported.add(int(v["passage"]))
    if not holds:
        return 0.0
    return sum(1 for r, held in enumerate(holds) if held or r in supported) / len(holds)


def context_tokens(context: Sequence[Mapping]) -> float:
    """``final.context_tokens``: whitespace tokens in the context passages."""
    return float(sum(count_tokens(h.get("text") or "") for h in context))


def acl_leak(leaks: Sequence) -> float:
    """``acl_leak_rate`` of one case: 1 when any candidate or context hit is a leak."""
    return 1.0 if leaks else 0.0
