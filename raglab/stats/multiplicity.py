"""Adjusting a family of p-values for multiplicity: Holm (default) or Benjamini-Hochberg."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

METHODS = ("holm", "bh")


def adjust_pvalues(p: Sequence[float | None], method: str = "holm") -> list[float | None]:
    """Adjusted p-values of the family ``p``, in the same order; ``None`` stays ``None`` and
    is not counted in the family.

    ``holm``: Holm's step-down adjustment, which controls the family-wise error rate under
    any dependence: with the ``m`` p-values sorted, ``p_adj(i) = max_{j <= i} min(1,
    (m - j + 1) p(j))``. ``bh``: Benjamini-Hochberg (``scipy.stats.false_discovery_control``),
    which controls the false discovery rate for independent or positively dependent tests.
    """
    if method not in METHODS:
        raise ValueError(f"unknown p-value adjustment {method!r} (one of {', '.join(METHODS)})")
    idx = [i for i, v in enumerate(p) if v is not None]
    vals = np.array([p[i] for i in idx], dtype=np.float64)
    if vals.size and not all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in vals):
        raise ValueError("p-values must be finite and in [0, 1]")
    out: list[float | None] = [None] * len(p)
    if not vals.size:
        return out
    if method == "holm":
        m = vals.size
        order = np.argsort(vals, kind="stable")
        stepped = np.minimum(1.0, (m - np.arange(m)) * vals[order])
        adj = np.empty(m)
        adj[order] = np.maximum.accumulate(stepped)
    else:
        from scipy.stats import false_discovery_control

        adj = np.asarray(false_discovery_control(vals, method="bh"), dtype=np.float64)
    for i, v in zip(idx, adj):
        out[i] = float(v)
    return out
