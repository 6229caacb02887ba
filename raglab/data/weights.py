"""Case weights: how much each case counts in every mean and paired statistic.

A case's own ``weight`` (a finite number from 0 to 1e12, default 1) is multiplied by the share of
traffic its tag values are given in ``dataset.weights`` (``{intent: {billing: 0.4, api:
0.6}}``): the cases of each listed tag value are scaled so that together they weigh that
share of the whole (post-stratification; several tag keys are matched together by iterative
proportional fitting, raking). Shares of a key are normalised to sum to 1; every case must
have the key, with a value that has a share. A noun: pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from raglab.data.schema import MAX_WEIGHT
from raglab.errors import UserError

_RAKING_ROUNDS = 100
_RAKING_TOL = 1e-12


def effective_weights(cases: Sequence[Any], shares: Mapping[str, Mapping[str, float]],
                      source: str | None = None) -> dict[str, float] | None:
    """``{case id: weight}``, or None when every case weighs 1 (an unweighted run).
    ``source``: the cases file, named by the errors."""
    w = {c.id: float(getattr(c, "weight", 1.0)) for c in cases}
    for cid, v in w.items():  # the schema bounds them; cases built in code are checked too
        if not (math.isfinite(v) and 0 <= v <= MAX_WEIGHT):
            raise UserError(f"weight {v!r}: a weight is a finite number from 0 to "
                            f"{MAX_WEIGHT:g}", file=source, case_id=cid)
    if not any(v > 0 for v in w.values()):
        raise UserError("every case has weight 0: nothing would be measured", file=source)
    if shares:
        w = _rake(cases, w, shares)
    total = math.fsum(w.values())
    if not (math.isfinite(total) and total > 0
            and all(math.isfinite(v) and v >= 0 for v in w.values())):
        raise UserError("dataset.weights: the case weights and shares give no finite "
                        "positive total; use weights and shares of similar size")
    if all(v == 1.0 for v in w.values()):
        return None
    return w


def _rake(cases: Sequence[Any], w: dict[str, float],
          shares: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    targets: dict[str, dict[str, float]] = {}
    for key, by_value in shares.items():
        if not by_value:
            raise UserError(f"dataset.weights.{key}: no tag value is given a share")
        bad = {v: s for v, s in by_value.items()
               if not (isinstance(s, int | float) and math.isfinite(s) and 0 <= s <= MAX_WEIGHT)}
        if bad:
            raise UserError(f"dataset.weights.{key}: shares must be finite numbers >= 0 and "
                            f"at most {MAX_WEIGHT:g} (got {bad})")
        total = math.fsum(by_value.values())
        if total <= 0:
            raise UserError(f"dataset.weights.{key}: the shares sum to 0")
        targets[key] = {str(v): s / total for v, s in by_value.items()}
        missing = [c.id for c in cases if key not in c.tags]
        if missing:
            raise UserError(f"dataset.weights.{key}: {len(missing)} case(s) have no tag {key!r} "
                            f"(e.g. {missing[0]}); give every case the tag or drop the key")
        unlisted: dict[str, list[str]] = {}
        for c in cases:
            if str(c.tags[key]) not in targets[key]:
                unlisted.setdefault(str(c.tags[key]), []).append(c.id)
        if unlisted:
            v, ids = next(iter(unlisted.items()))
            raise UserError(f"dataset.weights.{key}: tag value {v!r} has no share "
                            f"({len(ids)} case(s), e.g. {ids[0]}); give it a share (0 drops "
                            "those cases)")
        for v, s in targets[key].items():
            if s > 0 and not any(str(c.tags[key]) == v and w[c.id] > 0 for c in cases):
                raise UserError(f"dataset.weights.{key}.{v}: a share of {s:.3g} but no case "
                                "with weight has that tag value")
    total = sum(w.values())
    for _ in range(_RAKING_ROUNDS):
        worst = 0.0
        for key, target in targets.items():
            sums: dict[str, float] = {}
            for c in cases:
                sums[str(c.tags[key])] = sums.get(str(c.tags[key]), 0.0) + w[c.id]
            now = sum(sums.values())
            for c in cases:
                v = str(c.tags[key])
                want = target[v] * now
                if sums[v] > 0:
                    w[c.id] *= want / sums[v]
                worst = max(worst, abs(sums[v] / now - target[v]))
        if worst <= _RAKING_TOL:
            break
    scale = total / sum(w.values())   # the weights keep their total (the number of cases)
    return {k: v * scale for k, v in w.items()}


def effective_size(weights: Sequence[float]) -> float:
    """Kish's effective sample size, ``(sum w)^2 / sum w^2`` (computed on the weights divided
    by the largest, so that neither sum overflows nor underflows)."""
    top = max(weights, default=0.0)
    if not top > 0:
        return 0.0
    s = math.fsum(x / top for x in weights)
    q = math.fsum((x / top) ** 2 for x in weights)
    return s * s / q if q > 0 else 0.0
