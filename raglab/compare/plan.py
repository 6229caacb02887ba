"""``raglab plan``: what a gate set can decide on a baseline's cases, before any candidate
runs. One line per gated check and slice (the checks ``raglab decide`` would make): the
paired cases there now, the smallest change the check's test detects with 80% power, and
the paired cases the check needs to be settled.

Nothing about the candidate is known yet, so the plan assumes a candidate that changes a
share ``changed`` of the cases (default 0: none), as many for the better as for the worse
(no true change). A candidate that changes more cases needs more; one that improves the
metric may need fewer. The smallest change detectable is another question: the true
difference the check's test finds with 80% power. The figures come from the functions
``compare`` and ``decide`` use: the interval of a pass/fail metric or a share is the paired
score interval on those gains and losses (raglab.stats.settle), the minimum detectable
effect is the one the comparison's rows state. A metric of another kind (latency, cost,
counts) has no plan without the spread of its changes: run a candidate and read the
decision's ``cases_needed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from raglab.compare.gates import Gate, GateSet


def _pseudo_rows(table: Any) -> list[dict[str, Any]]:
    """Rows naming every metric in every slice of the table (what ``_targets`` expands)."""
    return [{"metric": name, "slice": None if key is None else {"key": key[0], "value": key[1]}}
            for key, _ in table.groups for name in table.names]


def _mde(kind: str, n: int, changed: float, alpha: float) -> float | None:
    from raglab.stats.score import normal_mde, score_mde

    if n < 1:
        return None
    if kind == "binary":
        return score_mde(n, round(changed, 6), round(alpha, 9))
    v = float(normal_mde(float(n), changed, alpha))
    return None if v != v else v


def plan_checks(table: Any, gates: GateSet, changed: float = 0.0) -> list[dict[str, Any]]:
    """One entry per check ``decide`` would make on this table's cases: ``gate``,
    ``slice``, ``metric``, ``rule``, ``n`` (cases where the metric applies), ``mde`` and
    ``cases_needed`` (None where the rule needs no number of cases, or the kind has no
    plan) with ``why`` when there is none."""
    from raglab.compare.decide import _targets
    from raglab.compare.settling import conditions_of
    from raglab.metrics.catalog import spec_of
    from raglab.stats.score import paired_interval
    from raglab.stats.settle import Basis, cases_to_settle

    if not 0.0 <= changed <= 1.0:
        raise ValueError(f"changed must be a share in [0, 1], got {changed}")
    rows = _pseudo_rows(table)
    out = []
    for gate in gates.gates:
        spec = spec_of(gate.metric)
        kind = spec.kind if spec is not None else "share"
        for target in _targets(gate, gates, rows):
            idx = table.positions(target)
            n = 0
            if idx is not None and gate.metric in table.names:
                j = table.names.index(gate.metric)
                col = table.B[idx][:, j]
                n = int((col == col).sum())     # not NaN: the metric applies
            entry: dict[str, Any] = {
                "gate": gate.title(), "metric": gate.metric, "rule": gate.rule,
                "slice": None if target is None else {"key": target[0], "value": target[1]},
                "n": n, "mde": None, "cases_needed": None, "why": None,
                "limit": _limit(gate)}
            out.append(entry)
            if n == 0:
                entry["why"] = "no case of the baseline has this metric here"
                continue
            scored = kind in ("binary", "share")
            if scored and (gate.rule != "bound" or gate.by == "interval"):
                entry["mde"] = _mde(kind, n, changed, gates.alpha)
            conds = conditions_of(gate)
            if not conds:
                entry["why"] = _no_count(gate)
                continue
            if not scored:
                entry["why"] = f"a {kind} metric: its plan needs the spread of the changes"
                continue
            half = changed * n / 2.0
            lo, hi = paired_interval(half, half, float(n), gates.confidence)
            basis = Basis(n, 0.0, float(lo[0]), float(hi[0]), gates.confidence,
                          (half, half, float(n)))
            settled = cases_to_settle(basis, conds, after=0)
            if settled is None:
                entry["why"] = "no number of cases shows it"  # a margin of 0 around 0
            else:
                entry["cases_needed"] = settled[0]
    return out


def _limit(gate: Gate) -> str:
    if gate.rule == "non_inferior":
        return f"the margin {gate.margin:g}"
    if gate.rule == "bound" and gate.by == "interval":
        return "the bound"
    return "it"


def _no_count(gate: Gate) -> str:
    if gate.rule == "not_worse":
        return "not_worse fails only on shown harm and never waits for cases"
    return "a bound on a value or an estimate, decided on the candidate's own figures"


def plan_lines(checks: Sequence[dict[str, Any]], gates: GateSet, changed: float) -> list[str]:
    """The plan as the terminal shows it."""
    assumption = ("changes no case" if changed == 0 else
                  f"changes {100 * changed:g}% of the cases, as many for the better as for "
                  "the worse")
    lines = [f"  (cases needed: for a candidate that {assumption}; smallest change "
             f"detectable: the true difference found with 80% power; intervals at "
             f"{gates.confidence:.0%})"]
    for c in checks:
        where = "overall" if not c["slice"] else f"{c['slice']['key']}={c['slice']['value']}"
        mde = "n/a" if c["mde"] is None else f"{c['mde']:.3g}"
        if c["cases_needed"] is not None:
            more = c["cases_needed"] - c["n"]
            need = (f"{c['limit']} needs {c['cases_needed']} cases"
                    + (f" ({more} more)" if more > 0 else " (enough now)"))
        else:
            need = str(c["why"])
        lines.append(f"  {c['gate']} [{where}]: {c['n']} cases now; smallest change "
                     f"detectable {mde}; {need}")
    return lines
