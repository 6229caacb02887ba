"""``raglab decide`` on a sequential run: its checks read the confidence sequences.

A run that stopped once its checks were settled (``metrics.json`` ``sequential``) chose
its number of cases by looking at the data; a fixed-n interval or test on those cases
would not hold its level. Each check of raglab.sequential.run.checks_of (interval checks,
``not_worse``, a ``bound``'s ``max``/``min`` on the candidate's mean) is decided instead on
its confidence sequence, in the order the cases were run (``records.jsonl`` order), at
the gate set's alpha (``not_worse`` checks sharing it), its bets tuned as the run tuned
them (the run's ``checks``' ``bet_target``), the cases weighed as the run weighed them. A
gate with several checks (a bound on the mean and on the change by interval) fails when
one fails and passes when all pass. A ``not_worse`` check still open passes (not shown
worse, as under the fixed-n rule); a bound on the mean still open when every case was run
is the fact of the full run (the candidate's mean), else inconclusive. A check that is
n/a or not comparable (metric versions differ) keeps its fixed-n result, as do
``estimator: ppi`` gates and budgets (a ``max``/``min`` on latency or cost: the mean of
the cases run, which the record says). A baseline whose records differ from those the run
settled on (``baseline_sha256``) is read all the same, and the record says so. A gate
set's ``underpowered: fail`` holds as on a fixed-n run: a check the sequence passes that is
underpowered on the cases run (its margin below the minimum detectable effect, a bound on
fewer than ``min_n`` cases) fails.

What decide reads of a run is checked first (:func:`summary_of`, :func:`check_pair`): a
``sequential`` section of the wrong shape, a candidate with cases its baseline lacks (a
sequential run's cases all come from its baseline), a sequential run given as the baseline
of one that is not (the two swapped?), or clustered cases (the sequences take the cases as
independent draws) are refused with one line.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from raglab.compare.gates import ANYTIME, FAIL, INCONCLUSIVE, PASS, GateSet
from raglab.errors import UserError
from raglab.sequential import run as seq
from raglab.sequential.run import Check
from raglab.sequential.settle import Settled


def _bad(value: Any, what: str) -> str | None:
    """Why ``value`` is not ``what`` (``count``, ``target``, ``text``, ``index``), or None."""
    import math

    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if what == "count" and not (number and value == int(value) and value >= 0):
        return "a count of cases"
    if what == "target" and value is not None and not (number and math.isfinite(value)
                                                       and value > 0):
        return "a positive number of cases or null"
    if what == "index" and not (isinstance(value, int) and not isinstance(value, bool)
                                and value >= 0):
        return "a gate's index (0, 1, ...)"
    if what == "text" and not isinstance(value, str):
        return "a string"
    return None


def summary_of(run: Any) -> dict[str, Any] | None:
    """The ``sequential`` section of a run's ``metrics.json`` (None: not a sequential run),
    checked for what decide reads of it; a UserError naming the file and the field
    otherwise (a section edited by hand, or written by something else)."""
    summary = (run.metrics or {}).get("sequential")
    if not summary:
        return None
    mlflow_id = getattr(run, "mlflow_run_id", None)
    file = f"metrics.json of MLflow run {mlflow_id}" if mlflow_id is not None else \
        str(Path(run.run_dir) / "metrics.json")

    def refuse(field: str, want: str) -> UserError:
        return UserError(f"'sequential.{field}' must be {want}; the section is not the one a "
                         "sequential run writes (docs/sequential.md): run the candidate "
                         "again to rewrite it", file=file)

    if not isinstance(summary, dict):
        raise UserError(
            f"'sequential' must be a mapping (found {type(summary).__name__}); the section "
            "is not the one a sequential run writes (docs/sequential.md): run the candidate "
            "again to rewrite it", file=file)
    if summary.get("stopped_because") not in (seq.SETTLED, seq.ALL_RUN):
        raise refuse("stopped_because", f"'{seq.SETTLED}' or '{seq.ALL_RUN}'")
    for field in ("cases_run", "cases_total", "seed"):
        if (want := _bad(summary.get(field), "count")) is not None:
            raise refuse(field, want)
    if summary["cases_run"] > summary["cases_total"]:
        raise refuse("cases_run", "at most cases_total")
    if (want := _bad(summary.get("gates"), "text")) is not None:
        raise refuse("gates", want)
    checks = summary.get("checks", [])
    if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
        raise refuse("checks", "a list of mappings")
    for i, c in enumerate(checks):
        where = c.get("slice")
        for field, want in (("index", _bad(c.get("index"), "index")),
                            ("metric", None if c.get("metric") is None
                             else _bad(c["metric"], "text")),
                            ("bet_target", _bad(c.get("bet_target"), "target")),
                            ("on", None if c.get("on", "delta") in ("delta", "mean")
                             else "'delta' or 'mean'"),
                            ("slice", None if where is None or (
                                isinstance(where, dict) and isinstance(where.get("key"), str)
                                and isinstance(where.get("value"), str))
                             else "null or {key: TAG, value: VALUE}")):
            if want is not None:
                raise refuse(f"checks[{i}].{field}", want)
    return summary


def check_pair(base: Any, cand: Any, allow_case_mismatch: bool,
               allow_incomplete: bool = False) -> None:
    """Refuse (UserError, one line) a pair decide cannot read as a sequential decision: a
    sequential candidate that did not finish (``--allow-incomplete`` reads it as a run of
    the cases it has), a sequential candidate with cases its baseline has no record of
    (dropped from the decision without a word otherwise; ``--allow-case-mismatch`` decides
    on the shared ones), or a sequential baseline with a candidate that is not one and
    holds cases the baseline did not run (BASELINE and CANDIDATE swapped?)."""
    config = getattr(cand, "config", None) or {}
    planned = config.get("sequential") if isinstance(config, dict) else None
    if not allow_incomplete and isinstance(planned, dict) and planned.get("against") and \
            (why := cand.incomplete()) is not None:
        raise UserError(f"the candidate run {cand.ref} is a sequential run that did not finish "
                        f"({why}): run its command again to resume it (it stops once its "
                        "checks are settled), then decide")
    if allow_case_mismatch:
        return
    theirs = {r["case_id"] for r in base.records}
    missing = [r["case_id"] for r in cand.records if r["case_id"] not in theirs]
    if not missing:
        return
    if (own := summary_of(cand)) is not None:
        raise UserError(
            f"the baseline run {base.label} has no record of case {missing[0]} ({len(missing)} "
            f"of the sequential candidate's {len(cand.records)} cases missing): a sequential "
            "run's cases all come from its baseline; decide on that baseline (its "
            f"sequential.against: {own.get('against')}), or pass --allow-case-mismatch to "
            "decide on the shared cases")
    if (summary := summary_of(base)) is not None:
        raise UserError(
            f"the baseline run {base.label} is a sequential run ({summary['cases_run']} of "
            f"{summary['cases_total']} cases run) and the candidate {cand.label} is not: "
            "BASELINE and CANDIDATE swapped? The sequential run goes second (raglab decide "
            "BASELINE SEQUENTIAL_RUN); else pass --allow-case-mismatch to decide on the "
            f"{len(cand.records) - len(missing)} shared cases")


def refuse_clusters(comp: Any) -> None:
    """A comparison of a sequential candidate that clusters its cases (``--set
    cluster=KEY``, or conversations' turns) is refused (UserError): the confidence
    sequences take the cases as independent draws, which clustered cases are not, as the
    run itself refuses conversations."""
    said = comp.settings.get("clustering")
    if said:
        raise UserError(
            f"compare.cluster={comp.settings.get('cluster')}: the comparison is {said}, but a "
            "sequential run's checks read confidence sequences that take the cases as "
            "independent draws, which clustered cases are not: decide on a run of every case "
            "(one without sequential.against)")


def _on_data(result: Mapping[str, Any], checks: Sequence[Check]) -> bool:
    """Whether a result is replaced by its sequences: not when it is n/a, not comparable
    (metric versions differ), or has no paired case for a check on the change."""
    if result["status"] == "n/a":
        return False
    if str(result.get("reason", "")).startswith("not comparable"):
        return False
    return bool(result.get("n")) or all(c.kind == "mean" for c in checks)


def words(summary: Mapping[str, Any]) -> str:
    """"settled after N of M cases" (or "not settled: every case run")."""
    n, m = summary.get("cases_run"), summary.get("cases_total")
    if summary.get("stopped_because") == seq.SETTLED:
        return f"settled after {n} of {m} cases"
    return f"not settled before every case was run ({n} of {m} cases)"


def _num(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _fact(check: Check, result: Mapping[str, Any]) -> str:
    """A bound on the mean left open after every case: the candidate's mean itself."""
    cand, gate = result.get("candidate"), check.gate
    if cand is None:
        return FAIL
    ok = (gate.max is None or cand <= gate.max) and (gate.min is None or cand >= gate.min)
    return PASS if ok else FAIL


def _part(check: Check, st: Settled, result: Mapping[str, Any], every_case: bool
          ) -> tuple[str, str]:
    """One check's status and words."""
    low, high = seq.on_scale(check, st.low), seq.on_scale(check, st.high)
    what = "the candidate's mean" if check.kind == "mean" else "delta"
    fmt = "+.3g" if check.kind == "delta" else ".3g"
    words_ = f"confidence sequence of {what} ({low:{fmt}}, {high:{fmt}})"
    if st.status != INCONCLUSIVE:
        unit = "paired cases" if check.kind == "delta" else "cases"
        return st.status, f"{words_}: {st.status} settled after {st.at} of {st.n} {unit}"
    if check.open_as == "pass":
        return PASS, f"{words_} after {st.n} paired cases does not show it worse"
    if check.open_as == "fact" and every_case:
        status = _fact(check, result)
        return status, (f"{words_} left it open; every case was run, and the candidate's "
                        f"mean {_num(result.get('candidate'))} is a {status} on its own")
    return INCONCLUSIVE, f"{words_} after {st.n} cases neither shows the requirement nor " \
                         "its breach"


def _targets(checks: Sequence[Check], summary: Mapping[str, Any]) -> list[float | None]:
    """Each check's bet target as the run recorded it, by gate index, kind, slice and
    metric (None: not recorded, as by a run of another gate set: the untuned bets, valid
    all the same)."""
    recorded = {}
    for c in summary.get("checks") or []:
        where = c.get("slice")
        key = (c.get("index"), c.get("on", "delta"),
               None if where is None else (where.get("key"), where.get("value")))
        recorded[key] = (c.get("metric"), c.get("bet_target"))
    out: list[float | None] = []
    for ch in checks:
        metric, target = recorded.get(ch.key(), (None, None))
        out.append(target if metric in (None, ch.gate.metric) else None)
    return out


def on_sequence(results: Sequence[MutableMapping[str, Any]], gates: GateSet, base: Any,
                cand: Any, name: str = "gates") -> str:
    """Decide ``results``' checks (evaluate_gates' results, changed in place) on their
    confidence sequences; returns the record's line on the sequential run. A gate that
    cannot be read on a sequence is a UserError naming it (``name``: ``gates=NAME``)."""
    summary = summary_of(cand) or {}
    checks = seq.checks_of(gates, base.records, name)
    order = [r["case_id"] for r in cand.records]
    targets = _targets(checks, summary)
    settled = seq.settle_checks(checks, order, cand.by_id(), base.by_id(), gates.alpha,
                            str(base.run_dir), interval=True, targets=targets,
                            scale=seq.weight_scale(base.records),
                            cand_source=str(cand.run_dir))
    every_case = summary.get("stopped_because") == seq.ALL_RUN
    recorded = summary.get("baseline_sha256")
    # the digest of what the run's own checks read (decide may be given another gate set)
    ran = [c.get("metric") for c in summary.get("checks") or []]
    changed = recorded is not None and recorded != seq.baseline_digest(
        checks, base.by_id().values(), ran if ran and all(ran) else None)
    budgets = {i for i, g in enumerate(gates.gates) if seq.is_budget(g)}
    for r in results:
        if r.get("index") in budgets and r.get("status") in (PASS, FAIL):
            r["reason"] = f"{r.get('reason') or ''} (a budget: the mean of the " \
                f"{len(cand.records)} cases run; it holds no sequential run back)".lstrip()
            continue
        mine = [(ch, st) for ch, st in zip(checks, settled) if ch.index == r.get("index")
                and r.get("slice") == (None if ch.slice is None else
                                       {"key": ch.slice[0], "value": ch.slice[1]})]
        if not mine or not _on_data(r, [ch for ch, _ in mine]):
            continue
        parts = [_part(ch, st, r, every_case) for ch, st in mine]
        statuses = [s for s, _ in parts]
        status = FAIL if FAIL in statuses else PASS if all(s == PASS for s in statuses) \
            else INCONCLUSIVE
        reason = "; ".join(w for _, w in parts) + " " + ANYTIME
        if status == PASS and r.get("underpowered") and gates.underpowered == "fail":
            # the gate set's rule holds here as on a fixed-n run: an underpowered pass fails
            status = FAIL
            reason = f"underpowered: {r.get('underpowered_why') or 'too few cases'} ({reason})"
        update: dict[str, Any] = {"status": status, "cases_needed": None, "settles_as": None,
                                  "reason": reason}
        delta = [(ch, st) for ch, st in mine if ch.kind == "delta"]
        if delta and delta[0][0].gate.rule != "not_worse":
            update.update(ci_low=delta[0][1].low, ci_high=delta[0][1].high)
        r.update(update)
    line = f"sequential run ({summary.get('gates')}, seed {summary.get('seed')}): " \
           f"{words(summary)}; its checks read their confidence sequences"
    foreign = sum(1 for t in targets if t is None) if summary.get("checks") else 0
    if foreign:
        line += (f"; {foreign} of its checks the run did not settle (another gate set?): "
                 "their bets untuned, valid all the same")
    if changed:
        line += ("; the baseline's records differ from those the run settled on (run "
                 "again since, or another run): the sequences read this baseline, still "
                 "valid at any stop, but not the ones the run stopped on")
    return line
