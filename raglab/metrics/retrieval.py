"""Retrieval metrics of one ranked list, from per-hit evidence judgments.

Definitions follow trec_eval where it has the measure: P@k divides by k; nDCG uses the
grade as gain with log2 discounting, the ideal ranking placing every item's grade in
descending order; MRR is 1/rank of the first relevant hit (0 when there is none).
For nDCG each hit is credited with at most one evidence item: the highest-graded one it
holds that no earlier hit was credited with.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from functools import lru_cache
from itertools import compress

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
    for k, (k_recall, k_all, k_hit, k_prec, k_ndcg) in _keys(prefix, tuple(cutoffs)):
        kk = n if k is None else min(k, n)
        denom = n if k is None else k
        j = bisect_left(ranks, kk)  # relevant hits within the first kk
        found = found_after[j - 1] if j else 0
        out[k_recall] = found / n_ev
        out[k_all] = 1.0 if found == n_ev else 0.0
        out[k_hit] = 1.0 if j else 0.0
        out[k_prec] = j / denom if denom > 0 else 0.0
        depth = n_ev if k is None else min(k, n_ev)
        idcg = ideal_cum[depth - 1] if depth else 0.0
        out[k_ndcg] = (dcg_after[j - 1] if j else 0.0) / idcg if idcg > 0 else 0.0
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
def _keys(prefix: str, cutoffs: tuple[int, ...]) -> list[tuple[int | None, tuple[str, ...]]]:
    out = []
    for k in [*cutoffs, None]:
        suffix = "" if k is None else f"@{k}"
        out.append((k, tuple(f"{prefix}.{m}{suffix}" for m in
                             ("evidence_recall", "all_evidence", "hit_rate", "precision", "ndcg"))))
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
