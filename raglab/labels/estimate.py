"""The run's estimates on the human scale: the ``ppi`` section of ``metrics.json``.

For every judged metric with labels stored in the run, the prediction-powered (PPI++,
power-tuned) estimate of the metric's mean as people would score it, with its interval,
beside the judge's plain mean: overall, and for each slice (tag key and value) with at
least :data:`MIN_SLICE_LABELS` usable labels. The judge's values are the records' per-case
values of the metric (cases where it does not apply are left out, as in the run's own
means); the labels are the usable ones (:func:`raglab.labels.store.usable_labels`). A
stratified sample is estimated stratum by stratum and combined with the strata's sizes as
weights (:func:`raglab.stats.ppi.ppi_stratified`); a slice of it likewise, over the part of
each stratum inside the slice.

Shape (``metrics.json["ppi"]``)::

    {"alpha": 0.05, "estimator": "ppi++", "interval": "auto", "min_slice_labels": 10,
     "sample": {"seed": 0, "by": null, "n_sampled": 60, "case_set_sha256": "...",
                "inclusion_probability": {"all": 0.26}},
     "metrics": {METRIC: {"metric_version": "...",
                          "labels": {"usable": 58, "stale": 0, "missing": 2},
                          "overall": ESTIMATE or null, "why": "..." (when null),
                          "slices": {TAG_KEY: {TAG_VALUE: ESTIMATE}}}}}

    ESTIMATE = {"estimate", "ci_low", "ci_high", "se", "lam", "n_labelled", "n_all",
                "judge_mean", "labelled_only_se", "n_effective", "stratified",
                "interval"}   # interval: score or hall (raglab.stats.ppi, "auto")
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from raglab.labels.store import (
    CaseState,
    LabelSet,
    case_set_sha256,
    read_sample,
    read_stored,
    run_cases,
)
from raglab.labels.store import usable_labels as _usable

ALPHA = 0.05
#: a slice gets an estimate when it holds at least this many usable labels
MIN_SLICE_LABELS = 10
#: the fewest usable labels to try an estimate from (raglab.stats.ppi refuses fewer than
#: its own minimum, per stratum too, and says so)
MIN_LABELS = 2
FIELDS = ("estimate", "ci_low", "ci_high", "se", "lam", "n_labelled", "n_all",
          "judge_mean", "labelled_only_se", "n_effective")


Parts = dict[str, tuple[list[float], list[float], list[float]]]


def estimate_from(parts: Parts, stratified: bool, alpha: float,
                  bounds: tuple[float, float], power: float | None = None
                  ) -> dict[str, Any] | str:
    """The ESTIMATE (module docstring) from ``parts``: stratum -> (human, judge on the
    labelled cases, judge on every case), one stratum unless ``stratified``; or why there
    is none (too few labels, in a stratum too: :class:`raglab.stats.ppi.TooFewLabels`).
    Used for a run's metric here and for a paired difference by compare, which asks for
    ``power``: the ESTIMATE then holds ``mde``, its interval's minimum detectable effect
    (:mod:`raglab.stats.ppi_power`; None out of reach)."""
    from raglab.stats.ppi import ppi_mean, ppi_stratified

    try:
        if not stratified:
            (human, judge_l, judge_all), = parts.values() or [([], [], [])]
            est = ppi_mean(human, judge_l, judge_all, alpha=alpha, bounds=bounds,
                           power=power)
        else:
            est = ppi_stratified(parts, {h: len(p[2]) for h, p in parts.items()},
                                 alpha=alpha, bounds=bounds, power=power)
    except ValueError as e:
        return " ".join(str(e).split())
    out: dict[str, Any] = {}
    for f in FIELDS:
        v = getattr(est, f)
        out[f] = int(v) if f in ("n_labelled", "n_all") else \
            (float(v) if v is not None and math.isfinite(float(v)) else None)
    out["stratified"] = stratified
    out["interval"] = est.interval
    if power is not None:
        out["mde"] = None if est.mde is None else float(est.mde)
    return out


def estimate(labels: LabelSet, judge: dict[str, float], cases: Iterable[str],
             alpha: float = ALPHA, min_labels: int = MIN_LABELS) -> dict[str, Any] | str:
    """The estimate over ``cases`` (a slice, or every case), or why there is none.
    ``judge``: case id -> the judge's value (cases where the metric applies)."""
    strata: Parts = {}
    for cid in cases:
        if cid not in judge:
            continue
        human, judge_l, judge_all = strata.setdefault(labels.stratum_of.get(cid, "?"),
                                                      ([], [], []))
        judge_all.append(judge[cid])
        if cid in labels.values:
            human.append(labels.values[cid])
            judge_l.append(judge[cid])
    n_labelled = sum(len(h) for h, _, _ in strata.values())
    if n_labelled < min_labels:
        return f"{n_labelled} usable label(s), fewer than {min_labels}"
    stratified = labels.design.by is not None
    if not stratified:
        strata = {"all": strata.get("all", ([], [], []))}
    return estimate_from(strata, stratified, alpha, (0.0, 1.0))


def ppi_section(run_dir: Path, alpha: float = ALPHA) -> dict[str, Any] | None:
    """The ``ppi`` section of the run's ``metrics.json`` (None: no labels in the run)."""
    metrics = sorted({lab.metric for lab in read_stored(run_dir)})
    sample = read_sample(run_dir)
    if not metrics or sample is None:
        return None
    design, extra = sample
    cases = run_cases(run_dir)
    out: dict[str, Any] = {
        "alpha": alpha, "estimator": "ppi++", "interval": "auto",
        "min_slice_labels": MIN_SLICE_LABELS,
        "sample": {"seed": design.seed, "by": design.by,
                   "n_sampled": len(design.sampled_ids()),
                   "case_set_sha256": design.case_set_sha256,
                   "inclusion_probability": extra.get("inclusion_probability")},
        "metrics": {}}
    changed = case_set_sha256(list(cases)) != design.case_set_sha256
    for metric in metrics:
        labels = _usable(run_dir, metric)
        if labels is None:
            continue
        if changed:  # cases the sample could not draw would enter the estimate
            out["metrics"][metric] = {
                "metric_version": labels.metric_version,
                "labels": {"usable": len(labels.values), "stale": labels.stale,
                           "missing": labels.missing},
                "overall": None, "slices": {},
                "why": "the run's cases changed since the sample was drawn; draw it again"}
            continue
        out["metrics"][metric] = _metric(labels, cases, alpha)
    return out


def _metric(labels: LabelSet, cases: dict[str, CaseState], alpha: float) -> dict[str, Any]:
    metric = labels.metric
    judge = {cid: float(c.metrics[metric]) for cid, c in cases.items()
             if isinstance(c.metrics.get(metric), int | float)}
    entry: dict[str, Any] = {"metric_version": labels.metric_version,
                             "labels": {"usable": len(labels.values), "stale": labels.stale,
                                        "missing": labels.missing}}
    overall = estimate(labels, judge, cases, alpha)
    if isinstance(overall, str):
        entry.update(overall=None, why=overall)
    else:
        entry["overall"] = overall
    slices: dict[str, dict[str, list[str]]] = {}
    for cid, c in cases.items():  # the slices of metrics.json (raglab.metrics.aggregate)
        for key, value in c.slices.items():
            slices.setdefault(key, {}).setdefault(value, []).append(cid)
    entry["slices"] = {}
    for key in sorted(slices):
        for value in sorted(slices[key]):
            members = slices[key][value]
            if sum(1 for c in members if c in labels.values) < MIN_SLICE_LABELS:
                continue
            est = estimate(labels, judge, members, alpha, MIN_SLICE_LABELS)
            if not isinstance(est, str):
                entry["slices"].setdefault(key, {})[value] = est
    return entry
