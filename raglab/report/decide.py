"""Gates and decision records (``raglab decide``).

:func:`evaluate_gates` is a pure function of a comparison's rows (``compare.json`` rows:
``metric``, ``slice``, ``baseline``, ``candidate``, ``delta``, ``ci_low``, ``ci_high``,
``p_value``, ``p_adjusted``, ``n``, ``comparable``, ...) and a :class:`GateSet`. Every gate
is checked overall and, with ``slices: critical``, on each critical slice; each check is
``pass``, ``fail`` or ``n/a``:

- ``n/a``: the metric is not reported, or applies to no case of either run, in that slice
  (``fail`` instead when the gate says ``required: true``);
- ``fail``: the row is marked not comparable (metric versions differ), or the statistic the
  rule needs cannot be computed (no paired case, no candidate value), or the rule does not
  hold (see raglab.report.gates_config).

The decision is GO when no check fails and at least one passed, else NO-GO.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from raglab.report.gates_config import Gate, GateSet
from raglab.stats import PairedStat, non_inferior, significantly_worse

PASS, FAIL, NA = "pass", "fail", "n/a"
GO, NO_GO = "GO", "NO-GO"


def _slice_of(row: Mapping[str, Any]) -> tuple[str, str] | None:
    s = row.get("slice")
    return None if not s else (str(s["key"]), str(s["value"]))


def _index(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, Any], Mapping[str, Any]]:
    return {(r["metric"], _slice_of(r)): r for r in rows}


def _targets(gate: Gate, gates: GateSet, rows: Sequence[Mapping[str, Any]]
             ) -> list[tuple[str, str] | None]:
    """Overall, then (``slices: critical``) each critical slice, ``{key}`` expanded to the
    values the comparison has for the gate's metric."""
    out: list[tuple[str, str] | None] = [None]
    if gate.slices != "critical":
        return out
    for ref in gates.critical_slices:
        if ref.value is not None:
            out.append((ref.key, ref.value))
            continue
        values = sorted({s[1] for r in rows if r["metric"] == gate.metric
                         and (s := _slice_of(r)) is not None and s[0] == ref.key})
        out += [(ref.key, v) for v in values] or [(ref.key, "*")]
    return list(dict.fromkeys(out))


def _stat(row: Mapping[str, Any]) -> PairedStat:
    return PairedStat(row.get("delta"), row.get("ci_low"), row.get("ci_high"),
                      row.get("p_value"), int(row.get("n") or 0), int(row.get("wins") or 0),
                      int(row.get("ties") or 0), int(row.get("losses") or 0), "row", "row")


def _fmt(x: Any) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def requirement(gate: Gate, alpha: float) -> str:
    """The rule of a gate in words (the decision record's gate table)."""
    if gate.rule == "non_inferior":
        return (f"CI low > -{gate.margin:g}" if gate.direction == "higher"
                else f"CI high < {gate.margin:g}")
    if gate.rule == "not_worse":
        bad = "lower" if gate.direction == "higher" else "higher"
        return f"not significantly {bad} (adjusted p >= {alpha:g})"
    parts = []
    if gate.max is not None:
        parts.append(f"candidate <= {gate.max:g}")
    if gate.min is not None:
        parts.append(f"candidate >= {gate.min:g}")
    if gate.max_increase is not None:
        parts.append(f"delta <= +{gate.max_increase:g}")
    if gate.max_decrease is not None:
        parts.append(f"delta >= -{gate.max_decrease:g}")
    return " and ".join(parts)


def _judge(gate: Gate, row: Mapping[str, Any] | None, alpha: float) -> tuple[str, str]:
    """(status, reason) of one gate on one row."""
    if row is None:
        return (FAIL if gate.required else NA), "not reported in this slice"
    if row.get("comparable") is False:
        return FAIL, "not comparable (metric versions differ)"
    base, cand = row.get("baseline"), row.get("candidate")
    if base is None and cand is None:
        return (FAIL if gate.required else NA), "applies to no case of either run"
    stat = _stat(row)
    if gate.rule == "bound":
        failed = []
        if gate.max is not None or gate.min is not None:
            if cand is None:
                return FAIL, "the metric applies to no case of the candidate"
            if gate.max is not None and not cand <= gate.max:
                failed.append(f"candidate {_fmt(cand)} > {gate.max:g}")
            if gate.min is not None and not cand >= gate.min:
                failed.append(f"candidate {_fmt(cand)} < {gate.min:g}")
        if gate.max_increase is not None or gate.max_decrease is not None:
            if stat.delta is None:
                return FAIL, "no paired case"
            if gate.max_increase is not None and not stat.delta <= gate.max_increase:
                failed.append(f"delta {stat.delta:+.4g} > +{gate.max_increase:g}")
            if gate.max_decrease is not None and not stat.delta >= -gate.max_decrease:
                failed.append(f"delta {stat.delta:+.4g} < -{gate.max_decrease:g}")
        return (FAIL, "; ".join(failed)) if failed else (PASS, "within bounds")
    if stat.n == 0 or stat.delta is None:
        return FAIL, "no paired case"
    if gate.rule == "non_inferior":
        assert gate.margin is not None
        if stat.ci_low is None or stat.ci_high is None:
            return FAIL, "no interval"
        if non_inferior(stat, gate.margin, gate.direction):
            return PASS, f"CI [{_fmt(stat.ci_low)}, {_fmt(stat.ci_high)}] within the margin"
        return FAIL, (f"CI [{_fmt(stat.ci_low)}, {_fmt(stat.ci_high)}] does not exclude a "
                      f"{'drop' if gate.direction == 'higher' else 'rise'} of {gate.margin:g}")
    p = row.get("p_adjusted")
    p = row.get("p_value") if p is None else p
    if p is None:
        return FAIL, "no p-value"
    if significantly_worse(stat, gate.direction, alpha, p):
        return FAIL, f"significantly worse (delta {stat.delta:+.4g}, adjusted p {p:.3g})"
    return PASS, f"not significantly worse (adjusted p {p:.3g})"


def evaluate_gates(rows: Sequence[Mapping[str, Any]], gates: GateSet) -> list[dict[str, Any]]:
    """One result per gate and slice checked (module docstring), in the gate set's order."""
    index = _index(rows)
    results = []
    for i, gate in enumerate(gates.gates):
        for target in _targets(gate, gates, rows):
            row = index.get((gate.metric, target))
            if target is not None and target[1] == "*":  # a critical key no case has
                status, reason = (FAIL if gate.required else NA), "no case has this tag"
            else:
                status, reason = _judge(gate, row, gates.alpha)
            r = row or {}
            results.append({
                "gate": gate.title(), "index": i, "metric": gate.metric, "rule": gate.rule,
                "slice": None if target is None else {"key": target[0], "value": target[1]},
                "requirement": requirement(gate, gates.alpha),
                **{k: r.get(k) for k in ("baseline", "candidate", "delta", "ci_low", "ci_high",
                                         "p_value", "p_adjusted", "n")},
                "status": status, "reason": reason,
            })
    return results


def decision_of(results: Sequence[Mapping[str, Any]]) -> str:
    """GO when no gate check failed and at least one passed; else NO-GO."""
    statuses = {r["status"] for r in results}
    return GO if FAIL not in statuses and PASS in statuses else NO_GO
