"""The run side of sequential decisions: the seeded order of the cases, the checks a run
settles as it goes, and the ``sequential`` section of its ``metrics.json``.

The checks of a gate set (:func:`checks_of`), overall and on each critical slice:

- interval checks (raglab.compare.settling.conditions_of: ``non_inferior``; a ``bound`` on
  a change ``by: interval``) on the paired differences ``candidate - baseline``;
- ``not_worse``: its one-sided test of harm beyond the margin made anytime-valid: it fails
  once the sequence of the paired differences lies wholly beyond the margin, and can no
  longer fail (pass) once it lies wholly on the good side (the sequence only narrows); the
  checks share the gate set's ``alpha`` equally (Bonferroni, where the fixed-n rule uses
  Holm); one that never settles passes (not shown worse), as the fixed-n rule does;
- a ``bound``'s ``max``/``min`` on the candidate's mean: the one-sample sequence of the
  candidate's values (``2 v - 1`` fed to the paired one, so a value ``v`` in ``[0, 1]``
  and a mean ``m`` map to ``2 v - 1`` and ``2 m - 1``): pass once it lies within the
  bound, fail once wholly beyond; one left open when every case was run is the fact of the
  full run, as the fixed-n rule reads it.

All read the cases run so far in the order their records were written (``records.jsonl``'s,
as decide reads them: the seeded order, but for the cases a resume ran again because their
records had failed; the baseline's records for the differences: cases where the metric
applies in both runs). Their metrics must lie in
``[0, 1]`` (pass/fail and share metrics): a gate on another kind (latency, cost, counts,
ranks) has no bounded values to bet on, and a change bounded ``by: estimate`` has no
interval; either is refused in a sequential gate set (one line naming the gate), but for
budgets (a ``max``/``min`` on such a metric: :func:`is_budget`), read on the cases run.

The bets are tuned to each check's size (raglab.sequential.cs ``target``): half the
baseline's cases of the run where the check's metric applies (in its slice), fixed before
the first case. Cases weigh what their baseline records weigh, divided by the largest
weight of the baseline run (also fixed before the first case).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from raglab.compare.gates import Gate, GateSet
from raglab.compare.settling import conditions_of
from raglab.errors import UserError
from raglab.metrics.aggregate import slice_keys
from raglab.metrics.catalog import spec_of
from raglab.sequential.settle import Settled, all_settled, settle
from raglab.stats.settle import Condition

SETTLED = "every check settled"
ALL_RUN = "every case run"
#: the kinds of metric whose per-case values lie in [0, 1]
BOUNDED = ("share", "binary")


def ordered(case_ids: Sequence[str], seed: int) -> list[str]:
    """The cases' ids in the order a sequential run takes them: a permutation drawn from
    ``seed`` (the same ids and seed give the same order)."""
    perm = np.random.default_rng(seed).permutation(len(case_ids))
    return [case_ids[int(i)] for i in perm]


@dataclass(frozen=True)
class Check:
    """One check: gate ``index`` of the set, its ``slice`` (None: overall) and conditions
    on ``delta`` (``kind`` ``delta``) or on ``2 m - 1`` of the candidate's mean ``m``
    (``mean``); ``share``: its part of the gate set's alpha; ``open_as``: what a check
    still open at the end is (``inconclusive``; ``pass`` for not_worse; ``fact`` for a
    bound on the mean: the fixed-n rule on the cases run)."""
    index: int
    gate: Gate
    slice: tuple[str, str] | None
    conditions: tuple[Condition, ...]
    kind: str = "delta"
    share: float = 1.0
    open_as: str = "inconclusive"

    def key(self) -> tuple[int, str, Any]:
        return self.index, self.kind, self.slice


def is_budget(gate: Gate) -> bool:
    """A ``bound`` with only ``max``/``min`` on a metric whose values are not in [0, 1]
    (latency, cost): a budget, read as the mean of the cases run (as the fixed-n rule reads
    it, a fact of the run), which holds no sequential run back."""
    spec = spec_of(gate.metric)
    return gate.rule == "bound" and (spec is None or spec.kind not in BOUNDED) and \
        gate.max_increase is None and gate.max_decrease is None


def _refusal(gate: Gate, i: int, name: str) -> str | None:
    spec = spec_of(gate.metric)
    kind = spec.kind if spec is not None else "?"
    what = f"{name}: gate {i + 1} ({gate.title()})"
    if kind not in BOUNDED:
        return (f"{what} reads {gate.metric}, whose values are not in [0, 1] ({kind}): a "
                "betting confidence sequence needs bounded values, so a sequential run "
                "cannot settle it; leave it out of the gate set")
    if gate.rule == "bound" and gate.by == "estimate" and (
            gate.max_increase is not None or gate.max_decrease is not None):
        return (f"{what} bounds a change by its estimate, which has no anytime-valid form "
                "after a stop chosen by the data; use by: interval")
    return None


def checks_of(gates: GateSet, rows: Iterable[Mapping[str, Any]], name: str = "gates"
              ) -> list[Check]:
    """The checks of ``gates`` (module docstring): each overall, and (``slices:
    critical``) on each critical slice, ``{key}`` alone expanded to the values the
    ``rows`` (baseline records) have. A gate that cannot be made sequential is a UserError
    naming it (``name``: the gate set's setting). ``estimator: ppi`` gates are left to the
    fixed-n rule, and so are budgets (:func:`is_budget`)."""
    rows = list(rows)
    out: list[Check] = []
    for i, gate in enumerate(gates.gates):
        if gate.estimator == "ppi" or is_budget(gate):
            continue
        refused = _refusal(gate, i, name)
        if refused:
            raise UserError(refused)
        targets: list[tuple[str, str] | None] = [None]
        if gate.slices == "critical":
            for ref in gates.critical_slices:
                if ref.value is not None:
                    targets.append((ref.key, ref.value))
                else:
                    values = sorted({k[ref.key] for r in rows
                                     if ref.key in (k := slice_keys(r))})
                    targets += [(ref.key, v) for v in values]
        kinds: list[tuple[str, tuple[Condition, ...], str]] = []
        if conds := tuple(conditions_of(gate)):
            kinds.append(("delta", conds, "inconclusive"))
        if gate.rule == "not_worse":
            margin = gate.margin or 0.0
            kinds.append(("delta", (Condition("above", -margin) if gate.direction == "higher"
                                    else Condition("below", margin),), "pass"))
        mean = [Condition("below", 2 * gate.max - 1, strict=False)] if gate.max is not None \
            else []
        if gate.min is not None:
            mean.append(Condition("above", 2 * gate.min - 1, strict=False))
        if mean:
            kinds.append(("mean", tuple(mean), "fact"))
        out += [Check(i, gate, t, c, k, 1.0, o) for t in dict.fromkeys(targets)
                for k, c, o in kinds]
    harm = sum(1 for c in out if c.gate.rule == "not_worse")
    return [Check(c.index, c.gate, c.slice, c.conditions, c.kind, 1.0 / harm, c.open_as)
            if c.gate.rule == "not_worse" else c for c in out]


def weight_scale(rows: Iterable[Mapping[str, Any]]) -> float:
    """The largest weight of the baseline's records (1 where absent): the constant each
    case's weight is divided by."""
    return max((float(r.get("weight", 1.0)) for r in rows), default=1.0) or 1.0


def differences(check: Check, order: Sequence[str], candidate: Mapping[str, Mapping],
                baseline: Mapping[str, Mapping], source: str, scale: float = 1.0,
                cand_source: str | None = None) -> tuple[list[float], list[float] | None]:
    """The check's values on the cases of ``order`` that the runs have, in its slice,
    where its metric applies (``delta``: ``candidate - baseline``, in both runs; ``mean``:
    ``2 v - 1`` of the candidate's value ``v``), and their weights (the baseline's
    divided by ``scale``; None when all are 1); a value outside ``[0, 1]`` is a UserError
    naming the run that holds it (``source``: the baseline run; ``cand_source``: the
    candidate, None while it runs)."""
    out, weights = [], []
    m = check.gate.metric
    for cid in order:
        c, b = candidate.get(cid), baseline.get(cid)
        if c is None or b is None:
            continue
        if check.slice is not None and slice_keys(c).get(check.slice[0]) != check.slice[1]:
            continue
        vc, vb = (c.get("metrics") or {}).get(m), (b.get("metrics") or {}).get(m)
        if vc is None or (vb is None and check.kind == "delta"):
            continue
        for who, v, file in (("candidate", vc, cand_source), ("baseline", vb, source)):
            if v is not None and not 0.0 <= v <= 1.0:
                raise UserError(f"sequential decisions need metrics in [0, 1]; the {who}'s "
                                f"{m} is {v}", file=file, case_id=cid)
        out.append(2.0 * float(vc) - 1.0 if vb is None or check.kind == "mean"
                   else float(vc) - float(vb))
        weights.append(float(b.get("weight", 1.0)) / scale)
    return out, None if all(w == 1.0 for w in weights) else weights


def baseline_digest(checks: Sequence[Check], rows: Iterable[Mapping[str, Any]],
                    metrics: Iterable[str] | None = None) -> str:
    """A digest of what the checks read of the baseline's records (each case's id, weight
    and values of the checks' metrics, in case-id order), so decide can tell whether it
    reads the baseline the run settled on (``metrics``: the metrics the run's checks read,
    when decide is given another gate set; default: those of ``checks``)."""
    import hashlib
    import json

    names = sorted(set(metrics) if metrics is not None else {c.gate.metric for c in checks})
    got = sorted((str(r["case_id"]), r.get("weight", 1.0),
                  [(r.get("metrics") or {}).get(m) for m in names]) for r in rows)
    return hashlib.sha256(json.dumps(got, default=str).encode()).hexdigest()


def _cases_of(check: Check, order: Sequence[str], baseline: Mapping[str, Mapping]
              ) -> Iterator[Mapping[str, Any]]:
    """The baseline's records of ``order`` that are the check's cases, as known before the
    run: in its slice and, for a check on the change, where the baseline has its metric.
    A check on the candidate's mean counts the slice's cases whether the baseline has the
    metric or not: its values are the candidate's, and whether the baseline has the metric
    on a case not yet run says something of the candidate's value there (the same case),
    which a predictable bet may not read. (For a check on the change, a case is one of its
    cases only where the baseline has the metric, and cases are independent.)"""
    for cid in order:
        b = baseline.get(cid)
        if b is None or (check.kind == "delta"
                         and (b.get("metrics") or {}).get(check.gate.metric) is None):
            continue
        if check.slice is None or slice_keys(b).get(check.slice[0]) == check.slice[1]:
            yield b


def bet_target(check: Check, order: Sequence[str], baseline: Mapping[str, Mapping]
               ) -> float:
    """Half the check's cases (:func:`_cases_of`, at least 1): the size the check's bets
    are tuned to, known before the run."""
    return max(sum(1 for _ in _cases_of(check, order, baseline)) / 2.0, 1.0)


def can_move(check: Check, order: Sequence[str], baseline: Mapping[str, Mapping]) -> bool:
    """Whether a case of ``order`` can move the check's sequence, as known before the run:
    one of its cases (:func:`_cases_of`) with a positive weight in the baseline. One that
    cannot (its slice's cases all weigh 0, or none has the metric) would stay open
    whatever the cases hold, and holds no run back."""
    return any(float(b.get("weight", 1.0)) > 0 for b in _cases_of(check, order, baseline))


def settle_checks(checks: Sequence[Check], order: Sequence[str],
                  candidate: Mapping[str, Mapping], baseline: Mapping[str, Mapping],
                  alpha: float, source: str, interval: bool = False,
                  targets: Sequence[float | None] | None = None, scale: float = 1.0,
                  cand_source: str | None = None) -> list[Settled]:
    """Each check settled (raglab.sequential.settle) on the cases run so far, at its share
    of ``alpha``, its bets tuned to its ``targets`` entry (None: not tuned); ``source``
    and ``cand_source`` name the runs (:func:`differences`)."""
    out = []
    for j, ch in enumerate(checks):
        d, w = differences(ch, order, candidate, baseline, source, scale, cand_source)
        out.append(settle(d, ch.conditions, alpha * ch.share, interval=interval,
                          target=None if targets is None else targets[j], weights=w))
    return out


def on_scale(check: Check, value: float | None) -> float | None:
    """An end of a check's sequence on its own scale: ``delta``, or the candidate's mean
    (``mean`` checks run on ``2 m - 1``)."""
    if value is None or check.kind == "delta":
        return value
    return round((value + 1.0) / 2.0, 12)


class Sequential:
    """What a sequential run needs: the baseline's rows by case id, the gate set's checks,
    the seeded order, each check's bet target and the batch size (``cfg``:
    raglab.config.SequentialCfg)."""

    def __init__(self, cfg: Any, gates: GateSet, gates_name: str, baseline: Any):
        self.cfg = cfg
        self.gates = gates
        self.gates_name = gates_name
        self.baseline = baseline.by_id()
        self.source = str(baseline.run_dir)
        self.checks = checks_of(gates, baseline.records, f"sequential.gates={gates_name}")
        if not self.checks:
            raise UserError(f"sequential.gates={gates_name}: no gate of the set is settled on "
                            "a confidence sequence (its budgets are read on the cases run and "
                            "estimator: ppi gates on human labels; neither holds a run back), "
                            "so a sequential run would only run every case: run without "
                            "sequential.against, or add a gate on a metric in [0, 1]")
        self.scale = weight_scale(baseline.records)
        self.unfinished = baseline.incomplete() if hasattr(baseline, "incomplete") else None
        own = (getattr(baseline, "metrics", None) or {}).get("sequential")
        self.base_sequential = own if isinstance(own, dict) else None
        versions = (getattr(baseline, "metrics", None) or {}).get("metric_versions")
        self.baseline_versions = versions if isinstance(versions, dict) else {}
        data = (getattr(baseline, "metrics", None) or {}).get("dataset")
        self.baseline_data = data if isinstance(data, dict) else {}
        self.order: list[str] = []
        self.targets: list[float | None] = [None] * len(self.checks)
        self.moving = [True] * len(self.checks)  # (can_move, set by arrange)
        self.total = 0
        self.stopped_because = ALL_RUN

    def check_versions(self, versions: Mapping[str, str]) -> None:
        """Before the first case: the families the checks read (retrieval, faithfulness,
        ...) graded as the baseline was (``versions``: this run's metric versions); a
        VersionMismatchError otherwise (exit 3, as decide would then refuse the pair): the
        run would stop on differences of scores graded differently."""
        from raglab.errors import VersionMismatchError
        from raglab.metrics.catalog import family_of

        families = dict.fromkeys(f for c in self.checks if (f := family_of(c.gate.metric)))
        bad = [f for f in families if f in self.baseline_versions and f in versions
               and self.baseline_versions[f] != versions[f]]
        if bad:
            what = "; ".join(f"{f}: baseline {self.baseline_versions[f]}, this run "
                             f"{versions[f]}" for f in bad)
            raise VersionMismatchError(
                f"sequential.against: metric versions differ for the gated families ({what}): "
                "the checks would stop the run on scores graded differently; grade both runs "
                "alike (the same grader settings), or run without sequential.against",
                file=self.source)

    def data_warnings(self, hashes: Mapping[str, str]) -> list[str]:
        """A warning for each data file this run (``hashes``: its dataset's) reads other
        than its baseline did: cases are paired by id, and an edited one is not the case
        the baseline ran (decide warns too)."""
        from raglab.compare.table import dataset_warnings

        return [f"sequential.against: {w}: the cases are paired by id, and an edited case "
                "is not the one the baseline ran"
                for w in dataset_warnings(self.baseline_data, dict(hashes))]

    def arrange(self, case_ids: Sequence[str]) -> list[str]:
        """The seeded order of all the run's cases (kept for :meth:`settled`) and the
        checks' bet targets."""
        missing = [c for c in case_ids if c not in self.baseline]
        if missing:
            why = ""  # the likely cause, when the baseline says it
            if self.unfinished:
                why = (f": the baseline run did not finish ({self.unfinished}); run its "
                       "command again to finish it first")
            elif self.base_sequential is not None:
                seq = self.base_sequential
                why = (f": the baseline is itself a sequential run ({seq.get('cases_run')} "
                       f"of {seq.get('cases_total')} cases run); give the run of every case "
                       f"it ran against (its sequential.against: {seq.get('against')})")
            raise UserError(f"sequential.against: the baseline run has no record of case "
                            f"{missing[0]} ({len(missing)} case(s) missing){why}",
                            file=self.source)
        turn = next((c for c in case_ids
                     if (self.baseline[c].get("tags") or {}).get("conversation")), None)
        if turn is not None:
            raise UserError(f"sequential.against: case {turn} is a conversation's turn; a "
                            "sequential run bets on cases as independent draws, and the "
                            "turns of a conversation are not (compare and decide cluster "
                            "them by conversation): run every case and decide on that run")
        names = dict.fromkeys(ch.gate.metric for ch in self.checks)
        for cid in case_ids:  # the baseline's values, known now: refused before any work
            got = self.baseline[cid].get("metrics") or {}
            bad = next((m for m in names if got.get(m) is not None
                        and not 0.0 <= got[m] <= 1.0), None)
            if bad is not None:
                raise UserError(f"sequential decisions need metrics in [0, 1]; the baseline's "
                                f"{bad} is {got[bad]}", file=self.source, case_id=cid)
        self.order = ordered(list(case_ids), self.cfg.seed)
        self.total = len(case_ids)
        self.targets = [bet_target(ch, self.order, self.baseline) for ch in self.checks]
        self.moving = [can_move(ch, self.order, self.baseline) for ch in self.checks]
        return self.order

    def _settle(self, kept: Mapping[str, Mapping], interval: bool) -> list[Settled]:
        # the order the records were written in (records.jsonl's, which decide reads): the
        # seeded order, but a resume runs the cases whose records failed again, after the
        # cases recorded before it
        return settle_checks(self.checks, list(kept), kept, self.baseline, self.gates.alpha,
                             self.source, interval=interval, targets=self.targets,
                             scale=self.scale)

    def settled(self, kept: Mapping[str, Mapping]) -> bool:
        """After a batch: whether every check is settled on the cases recorded so far
        (but those no case can move: :func:`can_move`; when none can, the run takes every
        case)."""
        moving = [r for r, m in zip(self._settle(kept, interval=False), self.moving) if m]
        done = bool(moving) and all_settled(moving)  # none can move: every case is run
        if done:
            self.stopped_because = SETTLED
        return done

    def summary(self, kept: Mapping[str, Mapping]) -> dict[str, Any]:
        """The ``sequential`` section of ``metrics.json``."""
        results = self._settle(kept, interval=True)
        return {
            "cases_run": sum(1 for c in self.order if c in kept), "cases_total": self.total,
            "seed": self.cfg.seed, "batch": self.cfg.batch,
            "stopped_because": self.stopped_because, "against": self.cfg.against,
            "gates": self.gates_name, "alpha": self.gates.alpha,
            "baseline_sha256": baseline_digest(self.checks, self.baseline.values()),
            "weighted": any(float(r.get("weight", 1.0)) != 1.0
                            for r in self.baseline.values()),
            "checks": [{"gate": ch.gate.title(), "index": ch.index, "metric": ch.gate.metric,
                        "on": ch.kind,
                        "slice": None if ch.slice is None else
                        {"key": ch.slice[0], "value": ch.slice[1]},
                        "status": r.status, "settled_at": r.at, "n": r.n,
                        "cs_low": on_scale(ch, r.low), "cs_high": on_scale(ch, r.high),
                        "bet_target": t}
                       for ch, r, t in zip(self.checks, results, self.targets)],
        }
