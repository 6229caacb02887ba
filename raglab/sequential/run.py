"""The run side of sequential decisions: the seeded order of the cases, the checks a run
settles as it goes, and the ``sequential`` section of its ``metrics.json``.

The checks are the interval checks of a gate set (raglab.compare.settling.conditions_of:
``non_inferior``; a ``bound`` on a change ``by: interval``), overall and on each critical
slice, read on the paired differences ``candidate - baseline`` of the cases run so far, in
the order they were run, against the baseline run's records (cases where the metric
applies in both runs). Their metrics must lie in ``[0, 1]`` (pass/fail and share metrics).
Other checks (``not_worse``; bounds on a mean) do not hold a run back: ``raglab decide``
reads them on the cases run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from raglab.compare.gates import Gate, GateSet
from raglab.compare.settling import conditions_of
from raglab.errors import UserError
from raglab.metrics.aggregate import slice_keys
from raglab.sequential.settle import Settled, all_settled, settle
from raglab.stats.settle import Condition

SETTLED = "every check settled"
ALL_RUN = "every case run"


def ordered(case_ids: Sequence[str], seed: int) -> list[str]:
    """The cases' ids in the order a sequential run takes them: a permutation drawn from
    ``seed`` (the same ids and seed give the same order)."""
    perm = np.random.default_rng(seed).permutation(len(case_ids))
    return [case_ids[int(i)] for i in perm]


@dataclass(frozen=True)
class Check:
    """One interval check: gate ``index`` of the set, its ``metric``, ``slice`` (None:
    overall) and conditions."""
    index: int
    gate: Gate
    slice: tuple[str, str] | None
    conditions: tuple[Condition, ...]


def checks_of(gates: GateSet, rows: Iterable[Mapping[str, Any]]) -> list[Check]:
    """The interval checks of ``gates``: each overall, and (``slices: critical``) on each
    critical slice, ``{key}`` alone expanded to the values the ``rows`` (baseline records)
    have."""
    rows = list(rows)
    out = []
    for i, gate in enumerate(gates.gates):
        conds = tuple(conditions_of(gate))
        if not conds or gate.estimator == "ppi":
            continue
        targets: list[tuple[str, str] | None] = [None]
        if gate.slices == "critical":
            for ref in gates.critical_slices:
                if ref.value is not None:
                    targets.append((ref.key, ref.value))
                else:
                    values = sorted({k[ref.key] for r in rows
                                     if ref.key in (k := slice_keys(r))})
                    targets += [(ref.key, v) for v in values]
        out += [Check(i, gate, t, conds) for t in dict.fromkeys(targets)]
    return out


def differences(check: Check, order: Sequence[str], candidate: Mapping[str, Mapping],
                baseline: Mapping[str, Mapping], source: str) -> list[float]:
    """``candidate - baseline`` of the check's metric on the cases of ``order`` that both
    runs have, in its slice, where the metric applies in both; a value outside ``[0, 1]``
    is a UserError (``source``: the baseline run)."""
    out = []
    m = check.gate.metric
    for cid in order:
        c, b = candidate.get(cid), baseline.get(cid)
        if c is None or b is None:
            continue
        if check.slice is not None and slice_keys(c).get(check.slice[0]) != check.slice[1]:
            continue
        vc, vb = (c.get("metrics") or {}).get(m), (b.get("metrics") or {}).get(m)
        if vc is None or vb is None:
            continue
        if not (0.0 <= vc <= 1.0 and 0.0 <= vb <= 1.0):
            raise UserError(f"sequential decisions need metrics in [0, 1]; {m} of case {cid} "
                            f"is {vc if not 0.0 <= vc <= 1.0 else vb}", file=source)
        out.append(float(vc) - float(vb))
    return out


def settle_checks(checks: Sequence[Check], order: Sequence[str],
                  candidate: Mapping[str, Mapping], baseline: Mapping[str, Mapping],
                  alpha: float, source: str, interval: bool = False) -> list[Settled]:
    """Each check settled (raglab.sequential.settle) on the cases run so far."""
    return [settle(differences(ch, order, candidate, baseline, source), ch.conditions, alpha,
                   interval=interval) for ch in checks]


class Sequential:
    """What a sequential run needs: the baseline's rows by case id, the gate set's interval
    checks, the seeded order and the batch size (``cfg``: raglab.config.SequentialCfg)."""

    def __init__(self, cfg: Any, gates: GateSet, gates_name: str, baseline: Any):
        self.cfg = cfg
        self.gates = gates
        self.gates_name = gates_name
        self.baseline = baseline.by_id()
        self.source = str(baseline.run_dir)
        self.checks = checks_of(gates, baseline.records)
        if not self.checks:
            raise UserError(f"sequential.gates={gates_name}: the gate set has no interval "
                            "check (non_inferior, or a bound by interval) to settle a run on")
        self.order: list[str] = []
        self.total = 0
        self.stopped_because = ALL_RUN

    def arrange(self, case_ids: Sequence[str]) -> list[str]:
        """The seeded order of all the run's cases (kept for :meth:`settled`)."""
        missing = [c for c in case_ids if c not in self.baseline]
        if missing:
            raise UserError(f"sequential.against: the baseline run has no record of case "
                            f"{missing[0]} ({len(missing)} case(s) missing)", file=self.source)
        self.order = ordered(list(case_ids), self.cfg.seed)
        self.total = len(case_ids)
        return self.order

    def settled(self, kept: Mapping[str, Mapping]) -> bool:
        """After a batch: whether every check is settled on the cases recorded so far."""
        done = all_settled(settle_checks(self.checks, self.order, kept, self.baseline,
                                         self.gates.alpha, self.source))
        if done:
            self.stopped_because = SETTLED
        return done

    def summary(self, kept: Mapping[str, Mapping]) -> dict[str, Any]:
        """The ``sequential`` section of ``metrics.json``."""
        results = settle_checks(self.checks, self.order, kept, self.baseline,
                                self.gates.alpha, self.source, interval=True)
        return {
            "cases_run": sum(1 for c in self.order if c in kept), "cases_total": self.total,
            "seed": self.cfg.seed, "batch": self.cfg.batch,
            "stopped_because": self.stopped_because, "against": self.cfg.against,
            "gates": self.gates_name, "alpha": self.gates.alpha,
            "checks": [{"gate": ch.gate.title(), "metric": ch.gate.metric,
                        "slice": None if ch.slice is None else
                        {"key": ch.slice[0], "value": ch.slice[1]},
                        "status": r.status, "settled_at": r.at, "n": r.n,
                        "cs_low": r.low, "cs_high": r.high}
                       for ch, r in zip(self.checks, results)],
        }
