"""The sweep-wide family of ``raglab compare SWEEP``: every pair of jobs, per headline metric.

Each headline metric's per-case values of every job go into one ``cases x jobs`` matrix
over the cases all jobs share (a case where the metric does not apply in some job is left
out of that metric); :func:`raglab.stats.family.tukey_hsd` gives each pair's family-wise
adjusted p-value and the best group: the best job by the metric's direction and every job
not separable from it at ``alpha``. The result is the ``family`` section of the sweep's
``compare.json``; the renderers and the MLflow logging only read it.
"""

from __future__ import annotations

import math
from typing import Any

METHOD = "randomised Tukey HSD"


def _value(v: Any) -> float:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float) and math.isfinite(float(v)):
        return float(v)
    return math.nan


def shared_cases(jobs: list) -> list[str]:
    """The case ids every job has, in the first job's order."""
    first = jobs[0].source.by_id()
    return [cid for cid in first if all(cid in j.source.by_id() for j in jobs[1:])]


def sweep_family(jobs: list, directions: dict[str, str], alpha: float,
                 n_permutations: int, seed: int) -> dict:
    """``{method, alpha, n_permutations, seed, n_shared_cases, n_cases, means, best, pairs,
    best_group}`` over ``jobs`` (each with ``name`` and ``source``) for each metric of
    ``directions`` (metric -> ``higher``, ``lower`` or ``none``; ``none`` reads as higher).
    ``pairs``: ``{a, b, metric, delta, p_adjusted}`` with ``a`` before ``b`` in job order
    and ``delta = mean(b) - mean(a)``. A metric with no case where it applies in every job
    has no pairs and no best group."""
    import numpy as np

    from raglab.compare.table import case_weights
    from raglab.stats.family import tukey_hsd

    ids = shared_cases(jobs)
    rows = [[j.source.by_id()[cid] for j in jobs] for cid in ids]
    weights = case_weights(jobs[0].source, ids)  # (None: every weight 1)
    names = [j.name for j in jobs]
    out: dict[str, Any] = {"method": METHOD, "alpha": alpha, "n_permutations": n_permutations,
                           "seed": seed, "n_shared_cases": len(ids), "n_cases": {},
                           "means": {}, "best": {}, "pairs": [], "best_group": {}}
    for metric, direction in directions.items():
        X = np.array([[_value((rec.get("metrics") or {}).get(metric)) for rec in row]
                      for row in rows], dtype=np.float64).reshape(len(ids), len(jobs))
        res = tukey_hsd(X, n_permutations, seed, direction != "lower", alpha, weights)
        out["n_cases"][metric] = res.n
        if res.n == 0:
            continue
        out["means"][metric] = {n: float(m) for n, m in zip(names, res.means)}
        out["best"][metric] = names[res.best]
        out["best_group"][metric] = [names[i] for i in res.best_group]
        for a in range(len(jobs)):
            for b in range(a + 1, len(jobs)):
                out["pairs"].append({"a": names[a], "b": names[b], "metric": metric,
                                     "delta": float(res.means[b] - res.means[a]),
                                     "p_adjusted": float(res.p_adjusted[a, b])})
    return out


def family_warnings(family: dict, jobs: list) -> list[str]:
    """Lines for the report: cases left out because not every job has them."""
    most = max(len(j.source.records) for j in jobs)
    if family["n_shared_cases"] < most:
        return [f"the sweep-wide family uses the {family['n_shared_cases']} cases every job "
                f"has (a job has {most})"]
    return []
