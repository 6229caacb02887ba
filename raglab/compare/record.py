"""The decision record of ``raglab decide``: built from an evaluated comparison
(:func:`build_record`, the ``decision-DATE-NAME.json``) and rendered as Markdown
(:func:`render_record`); the gate checks themselves are :mod:`raglab.compare.decide`'s."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from raglab.compare.decide import _fmt, decision_of, turns_on
from raglab.compare.gates import ANYTIME, FAIL, INCONCLUSIVE, NA, PASS, GateSet
from raglab.compare.kappa import gated_families, judge_lines
from raglab.compare.settling import cases_now
from raglab.compare.table import dataset_warnings
from raglab.metrics.aggregate import value_order
from raglab.metrics.diagnosis import CAUSES


def config_diff(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[dict]:
    """The flattened keys whose values differ (``null`` where one config lacks the key)."""
    from raglab.tracking.keys import flatten_config

    fb, fc = flatten_config(baseline or {}), flatten_config(candidate or {})
    return [{"key": k, "baseline": fb.get(k), "candidate": fc.get(k)}
            for k in sorted(set(fb) | set(fc)) if fb.get(k) != fc.get(k)]


def _run_info(src: Any, base: Path, project: Path) -> dict[str, Any]:
    from raglab.compare.paths import portable, scrub_paths

    m = src.metrics or {}
    dataset = m.get("dataset")
    if isinstance(dataset, dict):
        dataset = {**dataset, **{k: portable(dataset[k], base, project)
                                 for k in ("corpus", "cases") if k in dataset}}
    local = src.mlflow_run_id is None
    return {"label": src.label,
            "ref": portable(src.ref, base, project) if local else src.ref,
            "run_dir": portable(str(src.run_dir), base, project) if local else None,
            "mlflow_run_id": src.mlflow_run_id, "dataset": dataset,
            "config_hash": m.get("config_hash"), "n_cases": m.get("n_cases"),
            "errors": m.get("errors"), "metric_versions": m.get("metric_versions") or {},
            "self_graded": m.get("self_graded"),
            "config": scrub_paths(src.config, base, project)}


def gate_info(gate_name: str, gates: GateSet, source: str, overrides: Sequence[str],
              base: Path, project: Path, shipped: bool = False) -> dict[str, Any]:
    """The gate set as a reader can find it again: its config name, the sha256 of its file
    and of the set as applied (after ``gates.FIELD=VALUE`` overrides), and its file's path
    relative to the record only when that file is inside the project (a shipped set is
    named, never pointed into the installed package)."""
    import hashlib
    import json

    from raglab.compare.paths import file_sha256, portable

    applied = json.dumps(gates.model_dump(), sort_keys=True, separators=(",", ":"))
    return {"name": gate_name, "shipped": shipped,
            "source": None if shipped else portable(source, base, project),
            "file_sha256": file_sha256(source),
            "sha256": hashlib.sha256(applied.encode()).hexdigest(),
            "overrides": list(overrides), "confidence": gates.confidence,
            "description": gates.description, "set": gates.model_dump()}


def _cause_rank(cause: str) -> tuple[int, str]:
    order = ("passed", *CAUSES)
    return (order.index(cause), "") if cause in order else (len(order), cause)


def _diagnoses(comp: Any, gates: GateSet) -> dict[str, Any]:
    """Diagnosis counts of both runs, overall and on the critical slices, with the change."""
    d = comp.diagnoses or {}

    def table(roles: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
        b, c = roles.get("baseline") or {}, roles.get("candidate") or {}
        return {cause: {"baseline": int(b.get(cause, 0)), "candidate": int(c.get(cause, 0)),
                        "change": int(c.get(cause, 0)) - int(b.get(cause, 0))}
                for cause in sorted(dict.fromkeys([*b, *c]), key=_cause_rank)}

    slices = []
    for ref in gates.critical_slices:
        for value, roles in sorted(((d.get("slices") or {}).get(ref.key) or {}).items(),
                                   key=lambda vr: value_order(str(vr[0]))):
            if ref.value is None or str(value) == ref.value:
                slices.append({"key": ref.key, "value": str(value), "causes": table(roles)})
    return {"recorded": d.get("recorded"), "overall": table(d.get("overall") or {}),
            "critical_slices": slices}


def build_record(comp: Any, gates: GateSet, gate_name: str, gate_source: str,
                 results: list[dict], *, name: str, date: str, question: str | None,
                 extra_warnings: Sequence[str] = (), base_dir: Any = None,
                 project: Any = None, gate_overrides: Sequence[str] = (),
                 gate_shipped: bool = False) -> dict[str, Any]:
    """The decision record (``decision-DATE-NAME.json``) of an evaluated comparison, written
    to ``base_dir`` (default: the working directory) in the project folder ``project``
    (default: the working directory): local paths are relative to the record, and only
    those inside the project are named (:mod:`raglab.compare.paths`)."""
    project = Path(project or Path.cwd()).resolve()
    base = Path(base_dir or Path.cwd()).resolve()
    b, c = _run_info(comp.baseline, base, project), _run_info(comp.candidate, base, project)
    warnings = list(comp.warnings) + list(extra_warnings)
    warnings += dataset_warnings(b["dataset"] or {}, c["dataset"] or {}, warnings)
    vb = b["metric_versions"].get("diagnosis")
    vc = c["metric_versions"].get("diagnosis")
    if vb != vc and not any("diagnos" in w for w in warnings):  # compare may have said so
        warnings.append(f"diagnosis versions differ (baseline {vb}, candidate {vc}): the "
                        "diagnoses were made with different thresholds or code")
    have = {(str(s["key"]), str(s["value"])) for s in getattr(comp, "slices", None) or []}
    for ref in gates.critical_slices:
        if not any(k == ref.key and (ref.value is None or v == ref.value) for k, v in have):
            warnings.append(f"critical slice {ref.label()} is not in the comparison "
                            "(no case has it): its gates did not apply")
    for r in results:
        if r.get("underpowered") and r["status"] in (PASS, FAIL):
            where = _slice_label(r["slice"])
            why = r.get("underpowered_why") or "its sample cannot carry it"
            if str(r.get("reason", "")).startswith("underpowered"):
                tail = "a pass there is weak evidence, so it fails"
            elif r["status"] == PASS and str(r.get("reason", "")).endswith(ANYTIME):
                tail = ("its confidence sequence passed it, valid at any stop (the power "
                        "figure is a fixed-n test's on the cases run)")
            elif r["status"] == PASS and r.get("rule") == "non_inferior":
                tail = ("it passed, but with no true change a pass was less than 80% likely "
                        "on these cases")
            elif r["status"] == PASS:
                tail = "a pass there is weak evidence"
            else:
                tail = "its fail rests on few cases: read them before acting on it"
            warnings.append(f"{r['gate']} [{where}] is underpowered: {why}; {tail}")
    from raglab.compare.human import ppi_warnings

    warnings += ppi_warnings(results)
    counts = {s: sum(1 for r in results if r["status"] == s)
              for s in (PASS, FAIL, INCONCLUSIVE, NA)}
    cal = getattr(comp, "calibration", None) or {}
    return {
        "decision": decision_of(results), "turns_on": turns_on(results), "name": name,
        "date": date, "question": question,
        "gates": gate_info(gate_name, gates, gate_source, gate_overrides, base, project,
                           gate_shipped),
        "baseline": b, "candidate": c,
        "config_diff": config_diff(b["config"], c["config"]),
        "metric_versions": comp.versions,
        "results": results, "counts": counts,
        "flipped": comp.flipped, "diagnoses": _diagnoses(comp, gates),
        "warnings": warnings, "settings": comp.settings,
        "self_graded": {"baseline": b["self_graded"], "candidate": c["self_graded"]},
        # the latest calibration of each gated family's grader version (compare.trust)
        "calibration": {f: dict(cal.get(f) or {}) for f in gated_families(gates)},
        # estimator: ppi gates: the labels each run holds and what they gave
        "human_scale": _human_scale(comp, gates),
    }


def _human_scale(comp: Any, gates: GateSet) -> dict[str, Any] | None:
    """The human-scale section of the metrics gated with ``estimator: ppi``: the estimator,
    each run's labels (usable, stale, missing, metric version) and the overall entry."""
    section = getattr(comp, "ppi", None) or {}
    metrics = sorted({g.metric for g in gates.gates if g.estimator == "ppi"})
    if not metrics:
        return None
    return {"estimator": section.get("estimator"), "interval": section.get("interval"),
            "alpha": section.get("alpha"), "min_labels": section.get("min_labels"),
            "metrics": {m: {"labels": ((section.get("metrics") or {}).get(m) or {}).get(
                "labels"), "overall": ((section.get("metrics") or {}).get(m) or {}).get(
                "overall")} for m in metrics}}


def human_scale_lines(rec: Mapping[str, Any]) -> list[str]:
    """The record's Markdown on the checks decided on the human scale."""
    checks = [r for r in rec["results"] if r.get("estimator") == "ppi"]
    if not checks:
        return []
    hs = rec.get("human_scale") or {}
    lines = ["## Human scale", "",
             f"Checks marked PPI++ were decided on the prediction-powered difference "
             f"({hs.get('estimator')}, power-tuned; interval {hs.get('interval')}): the "
             "judge's difference over every paired case, corrected by the mean of (human - "
             "lambda x judge) differences over the cases labelled in both runs.", ""]
    rows = []
    for r in checks:
        h = r.get("human_scale") or {}
        if "labelled_pairs" not in h:
            rows.append([r["gate"], _slice_label(r["slice"]), "n/a", "n/a", "", "", "",
                         h.get("why", "")])
            continue
        judge = "n/a" if h.get("judge_delta") is None else f"{h['judge_delta']:+.4g}"
        rows.append([r["gate"], _slice_label(r["slice"]), judge,
                     f"{r['delta']:+.4g} {_ci(r)}", h["labelled_pairs"], f"{h['lam']:.3g}",
                     f"{h['n_effective']:.1f} ({h['gained']:+.1f})", ""])
    lines += _table(["gate", "slice", "judge's delta", "human-scale delta", "labelled pairs",
                     "lambda", "effective labels (gained)", "why not"], rows)
    for metric, m in (hs.get("metrics") or {}).items():
        for role in ("baseline", "candidate"):
            s = (m.get("labels") or {}).get(role) or {}
            if "usable" in s:
                lines.append("")
                sha = str(s.get("labels_sha256") or "n/a")[:12]
                lines.append(f"- {_md(metric)}, {role}: {s['usable']} usable labels "
                             f"(metric version {_md(s['metric_version'])}; labels file "
                             f"sha256 {sha}; stale {s['stale_answer']}, other version "
                             f"{s['stale_version']}, missing {s['missing']})")
    return lines + [""]


def _md(text: Any) -> str:
    from raglab.text.escape import md

    return md(text)


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_md(x) for x in row) + " |" for row in rows]
    return out


def _slice_label(s: Mapping[str, Any] | None) -> str:
    return "overall" if not s else f"{s['key']}={s['value']}"


def _ci(r: Mapping[str, Any]) -> str:
    if r.get("ci_low") is None or r.get("ci_high") is None:
        return "n/a"
    return f"[{r['ci_low']:+.4g}, {r['ci_high']:+.4g}]"


def _signed(x: Any) -> str:
    return "n/a" if x is None else f"{x:+.4g}"


def _short(text: Any, n: int = 160) -> str:
    s = " ".join(str(text).split()) if text is not None else "(no answer)"
    return s if len(s) <= n else s[:n - 1] + "…"


def _diag(d: Any) -> str:
    if d is None:
        return "passed"
    if isinstance(d, Mapping):
        return ", ".join(d.get("causes") or [str(d.get("primary"))])
    return str(d)


def verdict_note(t: Mapping[str, Any]) -> str:
    """The verdict's note on a NO-GO that turns on a handful of changed cases."""
    checks = "; ".join(f"{c['gate']} [{_slice_label(c['slice'])}]: {c['changed']} of "
                       f"{c['n']} paired cases changed" for c in t["checks"])
    k = t["changed"]
    return (f"This NO-GO turns on {k} changed case{'s' if k != 1 else ''} at most per failed "
            f"check ({checks}): read those cases before acting on it.")


def settle_lines(rec: Mapping[str, Any]) -> list[str]:
    """One line per inconclusive check: where, how many paired cases it has and how many
    would settle it (and which way) if the change seen held."""
    out = []
    for r in rec["results"]:
        if r["status"] != INCONCLUSIVE:
            continue
        where = f"{r['gate']} [{_slice_label(r['slice'])}]"
        n, unit = cases_now(r)
        have = "no" if n is None else n
        if unit == "paired cases":
            unit = "paired cases where the metric applies"
        if r.get("cases_needed") is None:
            out.append(f"{where}: {have} {unit}; no number of them settles it if the "
                       "change seen held")
        else:
            out.append(f"{where}: {have} {unit}; {r['cases_needed']} would settle it "
                       f"({r['settles_as']}) if the change seen held")
    return out


def inconclusive_note(rec: Mapping[str, Any]) -> str | None:
    """The verdict's note on an INCONCLUSIVE decision: what it means, and what it takes."""
    if rec["decision"] != "INCONCLUSIVE":
        return None
    open_ = [r for r in rec["results"] if r["status"] == INCONCLUSIVE]
    k = len(open_)
    needed = [r["cases_needed"] for r in open_ if r.get("cases_needed") is not None]
    unit = ("paired cases where the metric applies, in its slice"
            if all((r.get("cases_unit") or "paired cases") == "paired cases" for r in open_)
            else "paired cases where the metric applies in its slice, or labelled pairs on "
                 "the human scale")
    most = (f" The most any of them needs is {max(needed)} ({unit}) if the change seen held."
            if needed else "")
    failing = [f"{r['gate']} [{_slice_label(r['slice'])}]" for r in open_
               if r.get("settles_as") == FAIL]
    lean = (f" {len(failing)} of them would fail with more cases like these: "
            f"{'; '.join(failing)}." if failing else "")
    return (f"INCONCLUSIVE: no gate was breached, but {k} check{'s' if k != 1 else ''} could "
            f"not be shown either way with the cases at hand. Not having shown a gate met is "
            f"no evidence that it is breached, nor the reverse.{lean}{most}")


def _where(run: Mapping[str, Any]) -> str:
    if run.get("mlflow_run_id"):
        return f"MLflow run {run['mlflow_run_id']}"
    return run.get("run_dir") or "outside the project (not named by path)"


def _gate_words(g: Mapping[str, Any]) -> str:
    """``default`` (shipped with raglab, sha256 1a2b3c4d5e6f) or ``ci/gates.yaml`` ..."""
    where = f"file {g['source']}" if g.get("source") else (
        "shipped with raglab" if g.get("shipped") else "its file is outside the project")
    sha = str(g.get("sha256") or "n/a")[:12]
    over = f"; overrides {' '.join(g['overrides'])}" if g.get("overrides") else ""
    return f"`{_md(g['name'])}` ({_md(where)}; sha256 {sha}{_md(over)})"


def render_record(rec: Mapping[str, Any], max_cases: int = 10) -> str:
    """The decision record as Markdown (``decision-DATE-NAME.md``)."""
    b, c = rec["baseline"], rec["candidate"]
    lines = [f"# Decision: {rec['decision']} ({rec['name']}, {rec['date']})", ""]
    lines += [f"**Question.** {_md(rec['question'] or '(none given)')}", ""]
    lines += [f"**Decision: {rec['decision']}.** Gate set {_gate_words(rec['gates'])}, "
              f"intervals at {rec['gates']['confidence']:.0%}: "
              f"{rec['counts'][PASS]} checks passed, {rec['counts'][FAIL]} failed, "
              f"{rec['counts'].get(INCONCLUSIVE, 0)} inconclusive, "
              f"{rec['counts'][NA]} did not apply.", ""]
    if rec.get("turns_on"):
        lines[-1:-1] = [_md(verdict_note(rec["turns_on"]))]
    note = inconclusive_note(rec)
    if note:
        lines += [_md(note), ""]
    if rec["gates"]["description"]:
        lines += [rec["gates"]["description"], ""]
    if note:
        lines += ["## What it would take", "",
                  "Each check not shown, with the cases it has and the cases that would settle "
                  "it if the change seen held: add cases of that kind (where the metric "
                  "applies, in that slice), or decide whether the margin is the one the "
                  "release needs.", ""]
        lines += [f"- {_md(x)}" for x in settle_lines(rec)] + [""]
    if rec["warnings"]:
        lines += ["## Warnings", ""] + [f"- {_md(w)}" for w in rec["warnings"]] + [""]
    lines += ["## Runs", ""]
    lines += _table(["", "baseline", "candidate"], [
        ["run", b["label"], c["label"]],
        ["where", _where(b), _where(c)],
        ["cases", b["n_cases"], c["n_cases"]], ["errors", b["errors"], c["errors"]],
        ["dataset", (b["dataset"] or {}).get("name"), (c["dataset"] or {}).get("name")],
        ["cases sha256", (b["dataset"] or {}).get("cases_sha256"),
         (c["dataset"] or {}).get("cases_sha256")],
        ["corpus sha256", (b["dataset"] or {}).get("corpus_sha256"),
         (c["dataset"] or {}).get("corpus_sha256")],
        ["config hash", b["config_hash"], c["config_hash"]]])
    lines += ["", "## Configuration differences", ""]
    absent = "(absent)"
    lines += _table(["key", "baseline", "candidate"],
                    [[d["key"], absent if d["baseline"] is None else d["baseline"],
                      absent if d["candidate"] is None else d["candidate"]]
                     for d in rec["config_diff"]]) \
        if rec["config_diff"] else ["(the configurations are identical)"]
    lines += ["", "## Gates", ""]
    lines += _table(["gate", "slice", "requirement", "baseline", "candidate", "delta",
                     "interval", "p adj.", "n", "MDE", "result", "why"],
                    [[r["gate"], _slice_label(r["slice"]), r["requirement"], _fmt(r["baseline"]),
                      _fmt(r["candidate"]), _signed(r["delta"]), _ci(r),
                      _fmt(r.get("p_one_sided_adjusted") if r["rule"] == "not_worse"
                           else r["p_adjusted"]),
                      _fmt(r["n"]), _fmt(r.get("mde")), r["status"].upper(), r["reason"]]
                     for r in rec["results"]])
    lines += ["", *human_scale_lines(rec)]
    lines += ["", *judge_lines(rec)]
    lines += ["", "## Metric versions", ""]
    vb = (rec["metric_versions"] or {}).get("baseline") or b["metric_versions"]
    vc = (rec["metric_versions"] or {}).get("candidate") or c["metric_versions"]
    lines += _table(["family", "baseline", "candidate", ""],
                    [[f, vb.get(f), vc.get(f), "" if vb.get(f) == vc.get(f) else "DIFFERS"]
                     for f in sorted(set(vb) | set(vc))])
    lines += ["", "## Diagnoses", ""]
    diag = rec["diagnoses"]
    lines += ["Cases per cause (a case counts once per cause; `passed`: no failed check).", ""]
    lines += _table(["cause", "baseline", "candidate", "change"],
                    [[k, v["baseline"], v["candidate"], f"{v['change']:+d}"]
                     for k, v in diag["overall"].items()]) if diag["overall"] else ["(none)"]
    for s in diag["critical_slices"]:
        changed = {k: v for k, v in s["causes"].items() if v["change"] or k == "access_control"}
        if changed:
            lines += ["", f"Critical slice {_md(s['key'])}={_md(s['value'])}:", ""]
            lines += _table(["cause", "baseline", "candidate", "change"],
                            [[k, v["baseline"], v["candidate"], f"{v['change']:+d}"]
                             for k, v in changed.items()])
    lines += ["", "## Flipped cases", ""]
    any_flip = False
    for metric, f in (rec["flipped"] or {}).items():
        n_bad, n_good = f.get("n_pass_to_fail", 0), f.get("n_fail_to_pass", 0)
        if not (n_bad or n_good):
            continue
        any_flip = True
        lines += [f"### {metric}: {n_bad} pass→fail, {n_good} fail→pass "
                  f"(pass: {'≤' if f.get('direction') == 'lower' else '≥'} "
                  f"{f.get('threshold')})",
                  ""]
        for way, title in (("pass_to_fail", "pass→fail"), ("fail_to_pass", "fail→pass")):
            cases = (f.get(way) or [])[:max_cases]
            if not cases:
                continue
            lines += _table(["case", title, "question", "baseline answer", "candidate answer",
                             "baseline diagnosis", "candidate diagnosis"],
                            [[x["case_id"], f"{_fmt(x['baseline'])} → {_fmt(x['candidate'])}",
                              _short(x.get("question"), 100), _short(x.get("baseline_answer")),
                              _short(x.get("candidate_answer")), _diag(x.get("baseline_diagnosis")),
                              _diag(x.get("candidate_diagnosis"))] for x in cases])
            more = int(f.get(f"n_{way}", 0)) - len(cases)
            if more > 0:
                lines += ["", f"({more} more not listed here; see the .json record)"]
            lines += [""]
    if not any_flip:
        lines += ["(no case flipped on the headline metrics)", ""]
    s = rec["settings"] or {}
    from raglab.compare.render import interval_words

    interval_text = interval_words(s) if "confidence" in s else "n/a"
    clustered = f" ({s['clustering']})" if s.get("clustering") else ""
    lines += ["## Method", "",
              f"Paired on {s.get('n_cases', 'n/a')} case ids{clustered}. Intervals: "
              f"{interval_text} "
              f"({s.get('n_bootstrap', 'n/a')} resamples, seed {s.get('seed', 'n/a')}). "
              "non_inferior checks read the interval (a one-sided test at half the level each "
              "way: pass when it excludes the margin, fail when it lies wholly beyond it, "
              "inconclusive otherwise; all must pass, so no adjustment is needed for a GO); "
              "not_worse checks are the one-sided tests of a drop beyond their margin whose "
              "inversion is the interval, at half the level, adjusted together by Holm; an "
              "inconclusive check's cases needed are the paired cases of its slice at which "
              "its interval would settle it if the change seen held (the same gains and "
              "losses per case); MDE is the smallest true difference each check detects with "
              "80% power. "
              f"The comparison's own p adj. column: {s.get('adjust_name', 'n/a')} over the "
              f"{s.get('family_size', 'n/a')} headline metrics overall (confirmatory), "
              f"{s.get('adjust_exploratory_name', 'n/a')} over the rest (exploratory). "
              "Written by `raglab decide`.", ""]
    return "\n".join(lines)
