"""Retrieval metrics of one ranked list, from per-hit evidence judgments.

Definitions follow trec_eval where it has the measure: P@k divides by k; nDCG uses the
grade as gain with log2 discounting, the ideal ranking placing every item's grade in
descending order; MRR is 1/rank of the first relevant hit (0 when there is none).
For nDCG each hit is credited with at most one evidence item: the highest-graded one it
holds that no earlier hit was credited with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

_LOG2 = [1.0 / math.log2(r + 2) for r in range(1024)]


def _disc(r: int) -> float:
    return _LOG2[r] if r < len(_LOG2) else 1.0 / math.log2(r + 2)


def ranked_list_metrics(holds: Sequence[Sequence[int]], grades: Sequence[float],
                        cutoffs: Sequence[int], prefix: str) -> dict[str, float]:
    """All retrieval metrics of one stage for a case with gold evidence (``grades`` non-empty).

    ``holds[r]`` lists the evidence items the hit at rank r (0-based) holds.
    """
    n_ev = len(grades)
    n = len(holds)
    out: dict[str, float] = {}
    # Credit at most one item per hit for nDCG.
    credited: set[int] = set()
    gains = [0.0] * n
    found_at: list[int] = []  # number of distinct items found within the first r+1 hits
    seen: set[int] = set()
    first_rel = -1
    n_rel = 0
    rel_prefix = []  # relevant hits within the first r+1
    for r, held in enumerate(holds):
        if held:
            n_rel += 1
            if first_rel < 0:
                first_rel = r
            best = -1
            for i in held:
                seen.add(i)
                if i not in credited and (best < 0 or grades[i] > grades[best]):
                    best = i
            if best >= 0:
                credited.add(best)
                gains[r] = grades[best]
        found_at.append(len(seen))
        rel_prefix.append(n_rel)
    ideal = sorted(grades, reverse=True)

    def at(k: int | None) -> tuple[int, int, str]:
        kk = n if k is None else min(k, n)
        return kk, (k if k is not None else n), ("" if k is None else f"@{k}")

    for k in [*cutoffs, None]:
        kk, denom, suffix = at(k)
        found = found_at[kk - 1] if kk > 0 else 0
        rel = rel_prefix[kk - 1] if kk > 0 else 0
        out[f"{prefix}.evidence_recall{suffix}"] = found / n_ev
        out[f"{prefix}.all_evidence{suffix}"] = 1.0 if found == n_ev else 0.0
        out[f"{prefix}.hit_rate{suffix}"] = 1.0 if rel > 0 else 0.0
        out[f"{prefix}.precision{suffix}"] = rel / denom if denom > 0 else 0.0
        dcg = sum(gains[r] * _disc(r) for r in range(kk))
        depth = len(ideal) if k is None else min(k, len(ideal))
        idcg = sum(ideal[r] * _disc(r) for r in range(depth))
        out[f"{prefix}.ndcg{suffix}"] = dcg / idcg if idcg > 0 else 0.0
    out[f"{prefix}.mrr"] = 1.0 / (first_rel + 1) if first_rel >= 0 else 0.0
    return out


def context_metrics(holds: Sequence[Sequence[int]]) -> dict[str, float | None]:
    """``final.context_precision`` (rank-aware: mean of precision@i over relevant positions,
    0 when no context item is relevant) and ``final.first_gold_rank`` (1-based, None when no
    gold hit reached the context)."""
    rel = 0
    acc = 0.0
    first = None
    for r, held in enumerate(holds):
        if held:
            rel += 1
            acc += rel / (r + 1)
            if first is None:
                first = r + 1
    return {"final.context_precision": acc / rel if rel else 0.0,
            "final.first_gold_rank": first}


def stage_metric_names(prefix: str, cutoffs: Sequence[int]) -> list[str]:
    names = []
    for suffix in [*(f"@{k}" for k in cutoffs), ""]:
        for m in ("evidence_recall", "all_evidence", "hit_rate", "precision", "ndcg"):
            names.append(f"{prefix}.{m}{suffix}")
    names.append(f"{prefix}.mrr")
    return names
