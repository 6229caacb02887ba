"""The three outcomes of an interval-based gate check: its conditions on the interval
(:func:`conditions_of`), what its interval was made of (:func:`basis_from_row`) and the
words for the cases that would settle it (raglab.stats.settle)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raglab.compare.gates import Gate
from raglab.stats.settle import Basis, Condition


def conditions_of(gate: Gate) -> list[Condition]:
    """The interval conditions of an interval-based check (``non_inferior``; a ``bound``
    on a change ``by: interval``); empty for the others."""
    if gate.rule == "non_inferior":
        assert gate.margin is not None
        return [Condition("above", -gate.margin) if gate.direction == "higher"
                else Condition("below", gate.margin)]
    if gate.rule == "bound" and gate.by == "interval":
        out = []
        if gate.max_increase is not None:
            out.append(Condition("below", gate.max_increase, strict=False))
        if gate.max_decrease is not None:
            out.append(Condition("above", -gate.max_decrease, strict=False))
        return out
    return []


def _labelled(row: Mapping[str, Any]) -> int | None:
    """The labelled pairs of a check decided on the human scale (``estimator: ppi``)."""
    hs = row.get("human_scale")
    return int(hs["labelled_pairs"]) if isinstance(hs, Mapping) and hs.get(
        "labelled_pairs") else None


def cases_now(row: Mapping[str, Any]) -> tuple[int | None, str]:
    """``(number, unit)`` a check's interval rests on: its paired cases, or its labelled
    pairs on the human scale."""
    labelled = _labelled(row)
    if labelled is not None:
        return labelled, "labelled pairs"
    return (None if row.get("n") is None else int(row["n"])), "paired cases"


def needed_words(needed: tuple[int, str] | None, row: Mapping[str, Any]) -> str:
    """The reason's words on the cases an inconclusive check needs (labelled pairs, at
    the same share of the paired cases, for a check on the human scale)."""
    n, unit = cases_now(row)
    if needed is None:
        return (f"; no number of {unit} settles it if the change seen held (the estimate "
                "sits on the threshold, or there is no interval yet)")
    more = "" if n is None else f", {needed[0] - int(n)} more than the {int(n)} now"
    return (f"; {needed[0]} {unit} would settle it ({needed[1]}) if the change seen "
            f"held{more}")


def basis_from_row(gate: Gate, row: Mapping[str, Any], confidence: float) -> Basis | None:
    """A check's basis from its row alone: the counts of a pass/fail metric's score
    interval (``wins`` and ``losses``), else the interval itself (raglab.stats.settle); a
    check on the human scale counts its labelled pairs (the interval shrinks with the
    labels, the unlabelled cases growing with them)."""
    from raglab.metrics.catalog import spec_of

    n, d, lo, hi = row.get("n"), row.get("delta"), row.get("ci_low"), row.get("ci_high")
    n = _labelled(row) or n     # on the human scale the interval rests on the labels
    if not n or d is None or lo is None or hi is None:
        return None
    spec = spec_of(gate.metric)
    score = None
    if spec is not None and spec.kind == "binary" and not row.get("weighted") \
            and row.get("human_scale") is None and row.get("wins") is not None:
        up, down = int(row["wins"]), int(row["losses"])
        if gate.direction == "lower":
            up, down = down, up
        score = (float(up), float(down), float(n))
    return Basis(int(n), float(d), float(lo), float(hi), confidence, score)


