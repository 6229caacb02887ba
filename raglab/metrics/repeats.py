"""Combining the per-case metrics of independent grader repeats (``grader.repeats=N``).

A case graded N times has N metric dicts (one per repeat, each from
:func:`raglab.metrics.case.case_metrics`). The case's metric is the mean of the repeats
where it applies; the grader noise of a graded metric is the sample variance over those
repeats (``ddof=1``; 0.0 when the repeats agree), kept in the record so a comparison can
tell how much of a difference is grader noise. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from raglab.metrics.catalog import GRADED_FAMILIES, family_of


def combine_repeats(per_repeat: Sequence[dict[str, Any]]) -> tuple[dict[str, Any],
                                                                    dict[str, float]]:
    """``(mean metrics, {graded metric: variance over repeats})`` of N >= 1 repeats."""
    if not per_repeat:
        raise ValueError("no repeat to combine")
    names = list(dict.fromkeys(n for m in per_repeat for n in m))
    mean: dict[str, Any] = {}
    variance: dict[str, float] = {}
    for name in names:
        vals = [m[name] for m in per_repeat if m.get(name) is not None]
        if not vals:
            mean[name] = None
            continue
        mu = sum(vals) / len(vals)
        mean[name] = mu
        if family_of(name) in GRADED_FAMILIES:
            variance[name] = (sum((v - mu) ** 2 for v in vals) / (len(vals) - 1)
                              if len(vals) > 1 else 0.0)
    return mean, variance
