"""Gates and decision records (``raglab decide``).

:func:`evaluate_gates` is a pure function of a comparison's rows (``compare.json`` rows:
``metric``, ``slice``, ``baseline``, ``candidate``, ``delta``, ``ci_low``, ``ci_high``,
``p_value``, ``p_adjusted``, ``n``, ``comparable``, ...) and a :class:`GateSet`. Every gate
is checked overall and, with ``slices: critical``, on each critical slice; each check is
``pass``, ``fail``, ``inconclusive`` or ``n/a``:

- ``n/a``: the metric is not reported, or applies to no case of either run, in that slice
  (``fail`` instead when the gate says ``required: true``);
- ``fail``: the row is marked not comparable (metric versions differ), or the metric
  applies in one run only (no paired case; a ``max``/``min`` bound then reads the
  candidate's own mean), or the data show the rule's breach (raglab.compare.gates);
- ``inconclusive``: an interval-based check whose interval shows neither the requirement nor
  its breach; it carries ``cases_needed``, the paired cases of its slice at which it would
  be settled if the change seen so far held (raglab.stats.settle), and ``settles_as``.

:func:`raglab.compare.kappa.calibration_checks` adds one check per family of the gate
set's ``min_kappa``, from the latest calibration of the candidate's grader version of that
family (:mod:`raglab.compare.trust`): ``n/a`` when no gate of the family applied, ``fail``
when the version is uncalibrated or its kappa is below the minimum.

The decision (:func:`decision_of`) is NO-GO when a check failed; else INCONCLUSIVE when a
check is inconclusive; else GO when at least one gate check passed; else (nothing applied)
NO-GO.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from raglab.compare.gates import (
    FAIL,
    GO,
    INCONCLUSIVE,
    INCONCLUSIVE_DECISION,
    NA,
    NO_GO,
    PASS,
    Gate,
    GateSet,
)
from raglab.compare.kappa import MIN_KAPPA
from raglab.compare.settling import basis_from_row, cases_now, conditions_of, needed_words
from raglab.stats import PairedStat
from raglab.stats.settle import Basis, cases_to_settle


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
    words = _requirement(gate, alpha)
    return words + " on the human scale (PPI++)" if gate.estimator == "ppi" else words


def _requirement(gate: Gate, alpha: float) -> str:
    if gate.rule == "non_inferior":
        bound = f"{gate.margin:g}"
        return (f"CI low > {'-' + bound if gate.margin else '0'}"
                if gate.direction == "higher" else f"CI high < {bound}")
    if gate.rule == "not_worse":
        m = gate.margin or 0.0
        worse = (f"delta < -{m:g}" if gate.direction == "higher" else f"delta > +{m:g}") \
            if m else ("delta < 0" if gate.direction == "higher" else "delta > 0")
        return f"not shown worse: one-sided p of {worse} >= {alpha / 2:g} (Holm)"
    parts = []
    if gate.max is not None:
        parts.append(f"candidate <= {gate.max:g}")
    if gate.min is not None:
        parts.append(f"candidate >= {gate.min:g}")
    hi, lo = ("CI high", "CI low") if gate.by == "interval" else ("delta", "delta")
    if gate.max_increase is not None:
        parts.append(f"{hi} <= +{gate.max_increase:g}")
    if gate.max_decrease is not None:
        parts.append(f"{lo} >= -{gate.max_decrease:g}")
    return " and ".join(parts)


def run_means(baseline_metrics: Mapping[str, Any], candidate_metrics: Mapping[str, Any]
              ) -> dict[tuple[str, tuple[str, str] | None], tuple[Any, Any]]:
    """``{(metric, slice): (baseline mean, candidate mean)}`` from both runs' metrics.json
    (each run's own means, over every case where the metric applies, paired or not)."""
    out: dict[tuple[str, tuple[str, str] | None], list[Any]] = {}
    for j, m in enumerate((baseline_metrics or {}, candidate_metrics or {})):
        for name, v in (m.get("overall") or {}).items():
            out.setdefault((name, None), [None, None])[j] = v
        for key, values in (m.get("slices") or {}).items():
            for value, mets in (values or {}).items():
                for name, v in (mets or {}).items():
                    out.setdefault((name, (str(key), str(value))), [None, None])[j] = v
    return {k: (v[0], v[1]) for k, v in out.items()}


def _judge(gate: Gate, row: Mapping[str, Any] | None, alpha: float,
           own: tuple[Any, Any], worse: float | None = None) -> tuple[str, str]:
    """(status, reason) of one gate on one row; ``own``: each run's own mean; ``worse``:
    a not_worse check's adjusted one-sided p-value."""
    if row is not None and row.get("comparable") is False:
        return FAIL, "not comparable (metric versions differ)"
    paired = row is not None and (row.get("n") or 0) > 0
    if not paired:
        if own == (None, None):
            return (FAIL if gate.required else NA), (
                "not reported" if row is None else "applies to no case of either run")
        if gate.rule != "bound" or gate.max_increase is not None or \
                gate.max_decrease is not None:
            if None in own:
                one = "the baseline" if own[1] is None else "the candidate"
                return FAIL, f"no paired case: the metric applies in {one} only"
            return FAIL, "no case where the metric applies in both runs"
        row = {**(row or {}), "candidate": own[1]}
    assert row is not None
    cand = row.get("candidate")
    stat = _stat(row)
    if gate.rule == "bound":
        return _bound(gate, stat, cand)
    if stat.n == 0 or stat.delta is None:
        return FAIL, "no paired case"
    if gate.rule == "non_inferior":
        return _on_interval(gate, stat, f"{'drop' if gate.direction == 'higher' else 'rise'} "
                                        f"of {gate.margin:g}")
    assert gate.rule == "not_worse"
    if worse is None:
        return FAIL, "no one-sided test of this slice"
    level = alpha / 2
    if worse < level:
        return FAIL, (f"worse (delta {stat.delta:+.4g}; one-sided p adjusted {worse:.3g} "
                      f"< {level:g})")
    return PASS, f"not shown worse (one-sided p adjusted {worse:.3g})"


def _on_interval(gate: Gate, stat: PairedStat, breach: str) -> tuple[str, str]:
    """An interval-based check: pass, fail or inconclusive by :func:`conditions_of`."""
    if stat.ci_low is None or stat.ci_high is None:
        return INCONCLUSIVE, "no interval yet (too few cases for the test to reach its level)"
    ci = f"CI [{_fmt(stat.ci_low)}, {_fmt(stat.ci_high)}]"
    statuses = [c.status(stat.ci_low, stat.ci_high) for c in conditions_of(gate)]
    if FAIL in statuses:
        return FAIL, f"{ci} lies wholly beyond the {breach}: the data show the breach"
    if all(st == PASS for st in statuses):
        return PASS, f"{ci} within the {'margin' if gate.rule == 'non_inferior' else 'bound'}"
    return INCONCLUSIVE, f"{ci} neither excludes nor shows a {breach}"


def _bound(gate: Gate, stat: PairedStat, cand: Any) -> tuple[str, str]:
    failed = []
    if gate.max is not None or gate.min is not None:
        if cand is None:
            return FAIL, "the metric applies to no case of the candidate"
        if gate.max is not None and not cand <= gate.max:
            failed.append(f"candidate {_fmt(cand)} > {gate.max:g}")
        if gate.min is not None and not cand >= gate.min:
            failed.append(f"candidate {_fmt(cand)} < {gate.min:g}")
    on_change = gate.max_increase is not None or gate.max_decrease is not None
    if on_change and stat.delta is None:
        return FAIL, "no paired case"
    if on_change and gate.by == "estimate":
        assert stat.delta is not None
        if gate.max_increase is not None and not stat.delta <= gate.max_increase:
            failed.append(f"delta {stat.delta:+.4g} > +{gate.max_increase:g}")
        if gate.max_decrease is not None and not stat.delta >= -gate.max_decrease:
            failed.append(f"delta {stat.delta:+.4g} < -{gate.max_decrease:g}")
    if failed:
        return FAIL, "; ".join(failed)
    if on_change and gate.by == "interval":
        words = []
        if gate.max_increase is not None:
            words.append(f"rise of more than {gate.max_increase:g}")
        if gate.max_decrease is not None:
            words.append(f"drop of more than {gate.max_decrease:g}")
        what = " and ".join(words)
        return _on_interval(gate, stat, what)
    return PASS, "within bounds"


def _target_key(target: tuple[str, str] | None) -> tuple[str, str] | None:
    return None if target is None else (str(target[0]), str(target[1]))


def worse_side(gate: Gate) -> tuple[float, str]:
    """``(theta, side)`` of a not_worse gate's one-sided test: ``delta < -margin`` where
    higher is better, ``delta > margin`` where lower is."""
    m = gate.margin or 0.0
    return (-m, "less") if gate.direction == "higher" else (m, "greater")


def not_worse_tests(comp: Any, gates: GateSet) -> dict[tuple[int, Any], float | None]:
    """The raw one-sided p-value of every ``not_worse`` check (gate index, slice), from the
    comparison's paired cases (:meth:`raglab.compare.comparison.Comparison.one_sided`)."""
    todo = []
    for i, gate in enumerate(gates.gates):
        if gate.rule != "not_worse":
            continue
        for target in _targets(gate, gates, comp.rows):
            theta, side = worse_side(gate)
            todo.append(((i, _target_key(target)), (gate.metric, target, theta, side)))
    ps = comp.one_sided([t for _, t in todo]) if todo else []
    return {key: p for (key, _), p in zip(todo, ps)}


def _from_row(gate: Gate, row: Mapping[str, Any] | None) -> float | None:
    """A one-sided p-value at margin 0 from a row's two-sided one (for rows read back from
    compare.json, without the cases): half of it on the bad side, else ``1 - p/2``."""
    if row is None or (gate.margin or 0.0) != 0.0:
        return None
    p, d = row.get("p_value"), row.get("delta")
    if p is None or d is None:
        return None
    bad = d < 0 if gate.direction == "higher" else d > 0
    return p / 2 if bad else 1 - p / 2


def evaluate_gates(rows: Sequence[Mapping[str, Any]], gates: GateSet,
                   means: Mapping[tuple[str, Any], tuple[Any, Any]] | None = None,
                   one_sided: Mapping[tuple[int, Any], float | None] | None = None,
                   ppi: Mapping[str, Any] | None = None,
                   bases: Mapping[tuple[int, Any], Basis | None] | None = None
                   ) -> list[dict[str, Any]]:
    """One result per gate and slice checked (module docstring), in the gate set's order.
    ``means`` (:func:`run_means`) tells a metric that applies in one run only (a fail) from
    one that applies in neither (n/a) where no case is paired. ``one_sided``
    (:func:`not_worse_tests`): each not_worse check's raw one-sided p-value; without it a
    margin-0 check reads half its row's two-sided p-value. The not_worse p-values are
    adjusted together (Holm): the gate set's family of tests for harm. ``ppi``: the
    comparison's human-scale section (raglab.compare.human), read by ``estimator: ppi``
    gates in place of the judge's rows. ``bases`` (:func:`settle_bases`): what each
    interval-based check's interval was made of, for its ``cases_needed``; without it a
    basis is read from the row (exact for pass/fail metrics and any interval that is not a
    score interval on masses)."""
    from raglab.compare.human import ppi_row
    from raglab.stats import adjust_pvalues

    index = _index(rows)
    have = {k[1] for k in index}
    means = means or {}
    checks = []
    for i, gate in enumerate(gates.gates):
        for target in _targets(gate, gates, rows):
            row = index.get((gate.metric, target))
            if gate.estimator == "ppi" and row is not None:
                row = ppi_row(ppi, row, gates.alpha)
            checks.append((i, gate, target, row))
    raw: dict[int, float | None] = {}
    for c, (i, gate, target, row) in enumerate(checks):
        if gate.rule == "not_worse":
            key = (i, _target_key(target))
            raw[c] = one_sided[key] if one_sided is not None and key in one_sided \
                else _from_row(gate, row)
    fam = [c for c, p in raw.items() if p is not None]
    adjusted = dict(zip(fam, adjust_pvalues([raw[c] for c in fam], "holm")))
    results = []
    for c, (i, gate, target, row) in enumerate(checks):
        if target is not None and (target[1] == "*" or target not in have):
            status, reason = (FAIL if gate.required else NA), "no case in this slice"
        else:
            status, reason = _judge(gate, row, gates.alpha,
                                    means.get((gate.metric, target), (None, None)),
                                    adjusted.get(c))
        r = row or {}
        mde = _gate_mde(gate, r)
        under, why = None, None
        if gate.rule == "bound" and status != NA:
            why = _bound_sample(gate, r, gates.min_n)
            under = why is not None
            if under and status == PASS and gates.underpowered == "fail":
                status, reason = FAIL, f"underpowered: {why} ({reason})"
            elif under:
                reason += f"; underpowered: {why}"
        elif gate.rule == "non_inferior" and mde is not None:
            assert gate.margin is not None
            under = gate.margin < mde
            if under and status == PASS and gates.underpowered == "fail":
                status = FAIL
                reason = (f"underpowered: margin {gate.margin:g} below the minimum detectable "
                          f"effect {mde:.3g} ({reason})")
            elif under:
                reason += f"; underpowered: margin {gate.margin:g} < MDE {mde:.3g}"
            if under:
                why = (f"its margin {gate.margin:g} is below the minimum detectable effect "
                       f"{mde:.3g} (80% power)")
        needed: tuple[int, str] | None = None
        if status == INCONCLUSIVE:
            key = (i, _target_key(target))
            basis = bases[key] if bases is not None and key in bases \
                else basis_from_row(gate, r, gates.confidence)
            needed = None if basis is None else cases_to_settle(basis, conditions_of(gate))
            reason += needed_words(needed, r)
        results.append({
            "gate": gate.title(), "index": i, "metric": gate.metric, "rule": gate.rule,
            "slice": None if target is None else {"key": target[0], "value": target[1]},
            "requirement": requirement(gate, gates.alpha),
            **{k: r.get(k) for k in ("baseline", "candidate", "delta", "ci_low", "ci_high",
                                     "p_value", "p_adjusted", "n")},
            "p_one_sided": raw.get(c), "p_one_sided_adjusted": adjusted.get(c),
            "mde": mde, "underpowered": under, "underpowered_why": why,
            "changed": _changed(r),
            "status": status, "reason": reason, "estimator": gate.estimator,
            "cases_needed": None if needed is None else needed[0],
            "cases_unit": cases_now(r)[1],
            "settles_as": None if needed is None else needed[1],
            "human_scale": r.get("human_scale"),
        })
    return results


#: fewer changed cases than this, and a decision "turns on a handful" (its verdict says so)
HANDFUL = 5


def _changed(row: Mapping[str, Any]) -> int | None:
    """The paired cases whose value changed (wins + losses) of a check's row."""
    if not row or row.get("wins") is None or row.get("losses") is None:
        return None
    return int(row["wins"]) + int(row["losses"])


def _bound_sample(gate: Gate, row: Mapping[str, Any], min_n: int) -> str | None:
    """Why a bound check's sample cannot carry it (None when it can): fewer paired cases
    than ``min_n``, or a bounded change whose interval is wider than the bound's slack."""
    n = int(row.get("n") or 0)
    why = []
    if n < min_n:
        why.append(f"n {n} < min_n {min_n}")
    slacks = [b for b in (gate.max_increase, gate.max_decrease) if b is not None]
    lo, hi = row.get("ci_low"), row.get("ci_high")
    if slacks and gate.by == "estimate" and lo is not None and hi is not None \
            and hi - lo > min(slacks):
        why.append(f"interval [{lo:+.3g}, {hi:+.3g}] is wider than the bound's slack "
                   f"{min(slacks):g}")
    return "; ".join(why) or None


def turns_on(results: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """A NO-GO whose every failed check rests on fewer than :data:`HANDFUL` changed cases:
    ``{"changed": most changed cases of one failed check, "checks": [...]}``; else None."""
    failed = [r for r in results if r["status"] == FAIL]
    if not failed or decision_of(results) != NO_GO or any(
            r.get("changed") is None or r["changed"] >= HANDFUL for r in failed):
        return None
    return {"changed": max(r["changed"] for r in failed),
            "checks": [{"gate": r["gate"], "slice": r["slice"], "changed": r["changed"],
                        "n": r["n"]} for r in failed]}


def _gate_mde(gate: Gate, row: Mapping[str, Any]) -> float | None:
    """The minimum detectable effect of a check at 80% power: the row's, whose two-sided
    test at 1 - confidence is the one-sided test at half of it that ``non_inferior`` and
    ``not_worse`` checks make."""
    mde = row.get("mde")
    if mde is None or gate.rule == "bound":
        return None
    return float(mde)


def decision_of(results: Sequence[Mapping[str, Any]]) -> str:
    """NO-GO when a check failed; else INCONCLUSIVE when one is inconclusive; else GO when
    at least one gate check (not a ``min_kappa`` one) passed; else (nothing applied)
    NO-GO."""
    statuses = {r["status"] for r in results}
    if FAIL in statuses:
        return NO_GO
    if INCONCLUSIVE in statuses:
        return INCONCLUSIVE_DECISION
    passed = any(r["status"] == PASS and r.get("rule") != MIN_KAPPA for r in results)
    return GO if passed else NO_GO


def settle_bases(comp: Any, gates: GateSet) -> dict[tuple[int, Any], Basis | None]:
    """Each interval-based check's basis from the comparison's paired cases
    (:meth:`raglab.compare.comparison.Comparison.basis`); PPI checks read their rows."""
    out: dict[tuple[int, Any], Basis | None] = {}
    for i, gate in enumerate(gates.gates):
        if not conditions_of(gate) or gate.estimator == "ppi":
            continue
        for target in _targets(gate, gates, comp.rows):
            out[(i, _target_key(target))] = comp.basis(gate.metric, target)
    return out


def check_ppi_gates(comp: Any, gates: GateSet, source: str) -> None:
    """UserError (one line naming the gate file and gate) when a gate with ``estimator:
    ppi`` cannot be decided on the human scale in a slice the comparison has
    (:func:`raglab.compare.human.refusal`)."""
    from raglab.compare.human import refusal
    from raglab.errors import UserError

    have = {None} | {(str(s["key"]), str(s["value"])) for s in comp.slices}
    for i, gate in enumerate(gates.gates):
        if gate.estimator != "ppi":
            continue
        for target in _targets(gate, gates, comp.rows):
            if target not in have or comp.row(gate.metric, target) is None:
                continue    # the judge's check is n/a there too
            why = refusal(comp.ppi, gate.metric, target,
                          f"gates[{i}] ({'overall' if target is None else '='.join(target)})")
            if why:
                raise UserError(why, file=source)
