"""``raglab decide`` on a sequential run: its interval checks read the confidence sequence.

A run that stopped once its checks were settled (``metrics.json`` ``sequential``) chose
its number of cases by looking at the data; a fixed-n interval on those cases would not
hold its level. Each interval check (raglab.sequential.run.checks_of) is decided instead
on the confidence sequence of its paired differences, in the order the cases were run
(``records.jsonl`` order), at the gate set's alpha; its interval in the record is the
sequence's. The other checks keep their fixed-n rules on the cases run, and so does an
interval check that fails on something other than its interval (metric versions that
differ; a ``bound``'s absolute ``max``/``min`` on the candidate's mean).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from raglab.compare.gates import GateSet
from raglab.sequential.run import SETTLED, Check, checks_of, settle_checks


def _on_data(result: Mapping[str, Any], check: Check) -> bool:
    """Whether a check's fixed-n outcome rests on its interval, and so is replaced: not
    when it is n/a, has no paired case, is not comparable (metric versions differ), or
    fails a ``bound``'s absolute ``max``/``min`` on the candidate's mean."""
    if result["status"] == "n/a" or not result.get("n"):
        return False
    if str(result.get("reason", "")).startswith("not comparable"):
        return False
    gate, cand = check.gate, result.get("candidate")
    if gate.rule == "bound" and cand is not None and (
            (gate.max is not None and not cand <= gate.max)
            or (gate.min is not None and not cand >= gate.min)):
        return False
    return True


def words(summary: Mapping[str, Any]) -> str:
    """"settled after N of M cases" (or "not settled: every case run")."""
    n, m = summary.get("cases_run"), summary.get("cases_total")
    if summary.get("stopped_because") == SETTLED:
        return f"settled after {n} of {m} cases"
    return f"not settled before every case was run ({n} of {m} cases)"


def on_sequence(results: Sequence[MutableMapping[str, Any]], gates: GateSet, base: Any,
                cand: Any) -> str:
    """Decide ``results``' interval checks (evaluate_gates' results, changed in place) on
    the confidence sequence; returns the record's line on the sequential run."""
    summary = cand.metrics["sequential"]
    checks = checks_of(gates, base.records)
    order = [r["case_id"] for r in cand.records]
    settled = settle_checks(checks, order, cand.by_id(), base.by_id(), gates.alpha,
                            str(base.run_dir), interval=True)
    for ch, st in zip(checks, settled):
        where = None if ch.slice is None else {"key": ch.slice[0], "value": ch.slice[1]}
        for r in results:
            if r.get("index") != ch.index or r.get("slice") != where or not _on_data(r, ch):
                continue
            # open: its ends are the nearest values it excludes (raglab.sequential.cs)
            seq = f"confidence sequence ({st.low:+.3g}, {st.high:+.3g})"
            if st.status == "inconclusive":
                why = f"{seq} after {st.n} paired cases neither shows the requirement nor " \
                      "its breach"
            else:
                why = f"{seq}: {st.status} settled after {st.at} of {st.n} paired cases"
            r.update(status=st.status, ci_low=st.low, ci_high=st.high, cases_needed=None,
                     settles_as=None, reason=f"{why} (anytime-valid, sequential run)")
    return f"sequential run ({summary.get('gates')}, seed {summary.get('seed')}): " \
           f"{words(summary)}; interval checks read its confidence sequences"
