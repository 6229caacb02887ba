"""Paired differences on the human scale: the ``ppi`` section of a comparison.

For every judged metric with human labels in both runs (``raglab label``, stored in each
run's ``labels/``; :func:`raglab.labels.store.usable_labels`), the prediction-powered
(PPI++) difference: :func:`raglab.stats.ppi.ppi_mean` on the per-case differences
(candidate minus baseline), the people's on the cases labelled in both runs and the judge's
on every paired case where the metric applies in both (the rectifier is the per-case
difference of human minus judge). Overall and in every slice of the comparison with at
least :data:`raglab.stats.ppi.MIN_LABELS` labelled pairs; a stratified sample (``--by``)
is estimated stratum by stratum with the strata's paired cases as weights
(:func:`raglab.stats.ppi.ppi_stratified`). Beside it, each run's own human-scale mean over
the same cases (for ``bound`` gates on the candidate's value).

What can make an estimate unusable is said, never hidden (``why``), and :func:`refusal`
turns it into the one line ``raglab decide`` stops on when a gate asks for
``estimator: ppi``: no labels of the metric in a run, labels made under another metric
version (another judge) or for another answer (stale), sampled cases not labelled yet
(the labelled ones would no longer be a random sample), or too few labelled pairs.

Shape (``compare.json["ppi"]``; the rows keep their contract)::

    {"estimator": "ppi++", "interval": "auto", "alpha": 0.05, "min_labels": 10,
     "errors": {ROLE: "..."} (only when a run's labels file cannot be read),
     "metrics": {METRIC: {"labels": {"baseline": LABELS, "candidate": LABELS},
                          "overall": ENTRY, "slices": [{"slice": {"key", "value"}, **ENTRY}]}}}
    LABELS = {"usable", "stale_answer", "stale_version", "missing", "metric_version",
              "by", "labels_sha256"} or null (no labels), or {"error": "..."} (a bad
              labels file)
    ENTRY = {"delta": ESTIMATE or null, "baseline": ESTIMATE or null,
             "candidate": ESTIMATE or null, "why": null or "...", "labelled_pairs": N}
    ESTIMATE = the fields of raglab.stats.ppi.PPIEstimate (raglab.labels.estimate.FIELDS
               and "interval"), plus "stratified"; the delta's also "mde", its interval's
               minimum detectable effect at 80% power (raglab.stats.ppi_power; null when
               out of reach)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from raglab.errors import UserError

ESTIMATOR, INTERVAL = "ppi++", "auto"


def labels_home(src: Any) -> Path:
    """Where a run's labels are: its directory; for an MLflow run (downloaded without
    them), the directory it was run in when that is still there."""
    from raglab.labels.store import LABELS_DIR

    if src.mlflow_run_id is not None and src.origin_dir is not None \
            and (Path(src.origin_dir) / LABELS_DIR).is_dir():
        return Path(src.origin_dir)
    return Path(src.run_dir)


def _labelled_metrics(run_dir: Path) -> tuple[set[str], str | None]:
    """The metrics the run holds labels of, and the one line of a bad labels file."""
    from raglab.labels.store import read_stored

    try:
        return {lab.metric for lab in read_stored(run_dir)}, None
    except UserError as e:
        return set(), str(e)


def _label_state(run_dir: Path, metric: str) -> tuple[Any, dict[str, Any] | None]:
    """``(LabelSet or None, the LABELS entry)`` of a run."""
    from raglab.labels.store import read_stored, usable_labels

    try:
        labels = usable_labels(run_dir, metric)
    except UserError as e:
        return None, {"error": str(e)}
    if labels is None:
        return None, None
    stored = [lab for lab in read_stored(run_dir) if lab.metric == metric]
    version = labels.metric_version
    sampled = labels.design.sampled_ids()
    other = {lab.case_id for lab in stored
             if lab.metric_version != version and lab.case_id in sampled}
    other -= set(labels.values)
    from raglab.compare.paths import file_sha256
    from raglab.labels.store import LABELS_FILE, labels_dir

    return labels, {"usable": len(labels.values), "stale_version": len(other),
                    "stale_answer": max(labels.stale - len(other), 0),
                    "missing": labels.missing, "metric_version": version,
                    "by": labels.design.by,
                    "labels_sha256": file_sha256(labels_dir(run_dir) / LABELS_FILE)}


def _estimate(human, judge_l, judge_all, strata, alpha: float,
              bounds: tuple[float, float], power: float | None = None
              ) -> dict[str, Any] | str:
    """One estimate (or why there is none): ``strata`` None for a simple random sample,
    else each case's stratum (parallel to ``judge_all``, then to ``human``); ``power``:
    with its minimum detectable effect (``mde``)."""
    from raglab.labels.estimate import Parts, estimate_from

    if strata is None:
        return estimate_from({"all": (human, judge_l, judge_all)}, False, alpha, bounds,
                             power)
    all_strata, lab_strata = strata
    parts: Parts = {}
    for h, v in zip(all_strata, judge_all):
        parts.setdefault(h, ([], [], []))[2].append(v)
    for h, y, f in zip(lab_strata, human, judge_l):
        parts[h][0].append(y)
        parts[h][1].append(f)
    return estimate_from(parts, True, alpha, bounds, power)


def _entry(b, c, yb, yc, labelled, idx, strata_of, alpha: float) -> dict[str, Any]:
    """The ENTRY of the cases at positions ``idx``: ``b``, ``c`` the judge's values,
    ``yb``, ``yc`` the labels by position (NaN: unlabelled), ``labelled`` a mask."""
    import numpy as np

    from raglab.stats.ppi import MIN_LABELS
    from raglab.stats.ppi_power import POWER

    both = ~np.isnan(b[idx]) & ~np.isnan(c[idx])
    pos = idx[both]
    lab = pos[labelled[pos]]
    out: dict[str, Any] = {"delta": None, "baseline": None, "candidate": None, "why": None,
                           "labelled_pairs": int(lab.size)}
    if lab.size < MIN_LABELS:
        out["why"] = (f"{lab.size} labelled pair{'s' if lab.size != 1 else ''} (cases "
                      f"labelled in both runs where the metric applies in both), fewer "
                      f"than {MIN_LABELS}")
        return out
    strata = None if strata_of is None else (strata_of[pos], strata_of[lab])
    for key, human, judge in (("delta", yc - yb, c - b), ("baseline", yb, b),
                              ("candidate", yc, c)):
        delta = key == "delta"
        got = _estimate(human[lab], judge[lab], judge[pos], strata, alpha,
                        (-1.0, 1.0) if delta else (0.0, 1.0), POWER if delta else None)
        if isinstance(got, str):
            out["why"] = out["why"] or got
        else:
            out[key] = got
    return out


def human_scale(table: Any, alpha: float) -> dict[str, Any] | None:
    """The ``ppi`` section of a comparison (module docstring); None when neither run holds
    labels. ``table``: the comparison's :class:`raglab.compare.table.PairedTable`."""
    import numpy as np

    from raglab.stats.ppi import MIN_LABELS

    runs = {"baseline": table.baseline, "candidate": table.candidate}
    local = {role: labels_home(src) for role, src in runs.items()}
    found = {role: _labelled_metrics(d) for role, d in local.items()}
    errors = {role: err for role, (_, err) in found.items() if err}
    metrics = sorted((found["baseline"][0] | found["candidate"][0]) & set(table.names))
    if not metrics and not errors:
        return None
    out: dict[str, Any] = {"estimator": ESTIMATOR, "interval": INTERVAL, "alpha": alpha,
                           "min_labels": MIN_LABELS, "metrics": {}}
    if errors:
        out["errors"] = errors
    for metric in metrics:
        sets, states = {}, {}
        for role, run_dir in local.items():
            sets[role], states[role] = _label_state(run_dir, metric)
        entry: dict[str, Any] = {"labels": states, "overall": None, "slices": []}
        out["metrics"][metric] = entry
        why = _unusable(metric, states, sets, table)
        if why:
            entry["overall"] = {"delta": None, "baseline": None, "candidate": None,
                                "why": why, "labelled_pairs": 0}
            continue
        j = table.names.index(metric)
        b, c = table.B[:, j], table.C[:, j]
        vb, vc = sets["baseline"].values, sets["candidate"].values
        yb = np.array([vb.get(cid, np.nan) for cid in table.ids])
        yc = np.array([vc.get(cid, np.nan) for cid in table.ids])
        labelled = ~np.isnan(yb) & ~np.isnan(yc)
        by = sets["baseline"].design.by
        strata_of = None if by is None else np.array(
            [sets["baseline"].stratum_of.get(cid, "?") for cid in table.ids])
        for key, idx in table.groups:
            e = _entry(b, c, yb, yc, labelled, idx, strata_of, alpha)
            if key is None:
                entry["overall"] = e
            else:
                entry["slices"].append({"slice": {"key": key[0], "value": key[1]}, **e})
    return out


def _unusable(metric: str, states: dict, sets: dict, table: Any) -> str | None:
    """Why the runs' labels of ``metric`` cannot give a difference at all (None: they can)."""
    for role in ("baseline", "candidate"):
        s = states[role]
        if s is None:
            return (f"the {role} run has no labels of {metric} (raglab label RUN --n N "
                    f"--metrics {metric})")
        if "error" in s:
            return s["error"]
    if table.weights is not None:
        return ("the cases are weighted: the prediction-powered difference is for "
                "unweighted comparisons")
    bb, cb = (sets[r].design.by for r in ("baseline", "candidate"))
    if bb != cb:
        return (f"the runs' samples were drawn differently (baseline by {bb or 'nothing'}, "
                f"candidate by {cb or 'nothing'}): label both with the same --by")
    return None


def entry_of(section: Mapping[str, Any] | None, metric: str,
             target: tuple[str, str] | None) -> dict[str, Any] | None:
    """The ENTRY of ``metric`` overall (``target`` None) or in slice ``(key, value)``."""
    m = ((section or {}).get("metrics") or {}).get(metric)
    if m is None:
        return None
    if target is None:
        return m.get("overall")
    for s in m.get("slices") or []:
        if (s["slice"]["key"], s["slice"]["value"]) == tuple(target):
            return s
    return None


def refusal(section: dict[str, Any] | None, metric: str, target: tuple[str, str] | None,
            where: str) -> str | None:
    """Why a gate with ``estimator: ppi`` on ``metric`` at ``target`` cannot be decided
    (one line for ``raglab decide``; None: it can)."""
    gate = f"{where}: estimator: ppi on {metric}"
    for role, err in ((section or {}).get("errors") or {}).items():
        return f"{gate}: the {role} run's labels cannot be read: {err}"
    m = ((section or {}).get("metrics") or {}).get(metric)
    if m is None:
        return (f"{gate} needs human labels of {metric} in both runs; neither has any "
                f"(raglab label BASELINE CANDIDATE --n N --metrics {metric})")
    for role in ("baseline", "candidate"):
        s = m["labels"].get(role)
        if s is None or "error" in s:
            continue
        if s["stale_version"]:
            return (f"{gate}: {s['stale_version']} label(s) of the {role} run were made "
                    f"under another metric version than the run's {s['metric_version']} "
                    "(the judge changed since labelling): label them again")
        if s["stale_answer"]:
            return (f"{gate}: {s['stale_answer']} label(s) of the {role} run are stale (the "
                    "answer changed since labelling): label them again (raglab label RUN "
                    "--review)")
        if s["missing"]:
            return (f"{gate}: {s['missing']} sampled case(s) of the {role} run have no "
                    "label yet; finish the sample (raglab label RUN --review) so the "
                    "labelled cases stay a random sample")
    e = entry_of(section, metric, target)
    if e is None:
        return f"{gate}: no case of this slice is paired"
    if e.get("why"):
        return f"{gate}: {e['why']}"
    return None


# ---- renderers' rows (compare.md, compare.html, the terminal) -------------------------------
def _ci(e: dict[str, Any] | None) -> str:
    if not e or e.get("ci_low") is None or e.get("ci_high") is None:
        return "n/a"
    return f"{e['estimate']:+.3f} [{e['ci_low']:+.3f}, {e['ci_high']:+.3f}]"


def _judge(row: dict[str, Any] | None) -> str:
    if not row or row.get("delta") is None:
        return "n/a"
    if row.get("ci_low") is None or row.get("ci_high") is None:
        return f"{row['delta']:+.3f}"
    return f"{row['delta']:+.3f} [{row['ci_low']:+.3f}, {row['ci_high']:+.3f}]"


def ppi_tables(comp: Any) -> list[tuple[str, list[str], list[list[Any]]]]:
    """The human-scale section: per labelled metric, overall and in each slice with enough
    labelled pairs, the judge's difference beside the prediction-powered one."""
    section = getattr(comp, "ppi", None)
    if not section:
        return []
    rows: list[list[Any]] = []
    for metric, m in section["metrics"].items():
        entries: list[tuple[tuple[str, str] | None, dict[str, Any]]] = [
            (None, m.get("overall") or {})]
        entries += [((s["slice"]["key"], s["slice"]["value"]), s)
                    for s in m.get("slices") or [] if s.get("delta")]
        for target, e in entries:
            d = e.get("delta")
            where = "overall" if target is None else f"{target[0]}={target[1]}"
            if d is None:
                rows.append([metric, where, _judge(comp.row(metric, target)), "n/a",
                             e.get("labelled_pairs", 0), "", "", e.get("why") or ""])
                continue
            gained = d["n_effective"] - d["n_labelled"]
            rows.append([metric, where, _judge(comp.row(metric, target)), _ci(d),
                         d["n_labelled"], f"{d['lam']:.2f}",
                         f"{d['n_effective']:.0f} ({gained:+.0f})", ""])
    level = f"{1 - section['alpha']:.0%}"
    return [(f"Human scale (prediction-powered, PPI++, {level})",
             ["metric", "slice", "judge's delta [CI]", "human-scale delta [CI]",
              "labelled pairs", "lambda", "effective labels (gain)", "why not"], rows)]


def ppi_lines(comp: Any) -> list[str]:
    """The terminal's lines: each labelled metric's human-scale difference overall."""
    section = getattr(comp, "ppi", None)
    out = []
    for metric, m in ((section or {}).get("metrics") or {}).items():
        e = m.get("overall") or {}
        d = e.get("delta")
        if d is None:
            out.append(f"  human scale, {metric}: n/a ({e.get('why') or 'no estimate'})")
            continue
        out.append(f"  human scale, {metric}: {_ci(d)} from {d['n_labelled']} labelled pairs "
                   f"(worth {d['n_effective']:.0f} labels alone; the judge's delta "
                   f"{_judge(comp.row(metric))})")
    return out


def ppi_row(section: Mapping[str, Any] | None, row: Mapping[str, Any], alpha: float
            ) -> dict[str, Any]:
    """The comparison ``row`` of a gate with ``estimator: ppi``, its figures replaced by the
    human-scale ones (the difference, its interval and that interval's minimum detectable
    effect, each run's human-scale mean; ``n`` stays the paired cases) and
    ``human_scale`` holding the labels used and the effective sample size; ``raglab
    decide`` has refused beforehand where there is no estimate."""
    s = row.get("slice")
    target = None if not s else (str(s["key"]), str(s["value"]))
    e = entry_of(section, str(row["metric"]), target) or {}
    d = e.get("delta")
    out = {**row, "p_value": None, "p_adjusted": None, "wins": None, "ties": None,
           "losses": None, "mde": None, "human_scale": None}
    if d is None:
        out.update(delta=None, ci_low=None, ci_high=None, baseline=None, candidate=None)
        out["human_scale"] = {"why": e.get("why") or "no human-scale estimate"}
        return out
    b, c = e.get("baseline") or {}, e.get("candidate") or {}
    out.update(delta=d["estimate"], ci_low=d["ci_low"], ci_high=d["ci_high"],
               baseline=b.get("estimate"), candidate=c.get("estimate"), mde=d.get("mde"))
    out["human_scale"] = {
        "estimator": ESTIMATOR, "interval": d.get("interval", "hall"),
        "labelled_pairs": d["n_labelled"],
        "paired_cases": d["n_all"], "lam": d["lam"], "se": d["se"],
        "labelled_only_se": d["labelled_only_se"], "n_effective": d["n_effective"],
        "gained": d["n_effective"] - d["n_labelled"], "stratified": d.get("stratified"),
        "judge_delta": row.get("delta"), "judge_ci": [row.get("ci_low"), row.get("ci_high")],
        "alpha": alpha}
    return out


#: below this many labelled pairs a pass/fail difference's Hall interval (a stratified
#: sample's) under-covers (91-94% at 95% in docs/labels-statistics.md): the record says so
PASS_FAIL_PAIRS = 100


def ppi_warnings(results: list[dict[str, Any]]) -> list[str]:
    """The decision record's warnings on checks decided on the human scale: a pass/fail
    metric's difference from fewer than :data:`PASS_FAIL_PAIRS` labelled pairs with Hall's
    interval (a stratified sample; a simple random one gets the score interval, which
    holds its level there)."""
    from raglab.metrics.catalog import spec_of

    out = []
    for r in results:
        h = r.get("human_scale") or {}
        spec = spec_of(str(r.get("metric")))
        pairs = h.get("labelled_pairs")
        if r.get("estimator") == "ppi" and spec is not None and spec.kind == "binary" \
                and h.get("interval") == "hall" and pairs is not None \
                and pairs < PASS_FAIL_PAIRS:
            where = "overall" if not r.get("slice") else \
                f"{r['slice']['key']}={r['slice']['value']}"
            out.append(f"{r['gate']} [{where}] rests on {pairs} labelled pairs of a pass/fail "
                       f"metric with Hall's interval (a stratified sample): it covered "
                       f"91-94% instead of {1 - float(h.get('alpha', 0.05)):.0%} in "
                       f"simulations with fewer than {PASS_FAIL_PAIRS} "
                       "(docs/labels-statistics.md); label more pairs or read a pass as "
                       "weaker evidence")
    return out
