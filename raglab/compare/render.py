"""Rendering a :class:`~raglab.compare.comparison.Comparison`: ``compare.md``, a self-contained
``compare.html`` (inline CSS, plots as base64 PNG, no script, no external file) and the
terminal's headline table. matplotlib is imported lazily (Agg canvas, no pyplot)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raglab.metrics.catalog import HEADLINE
from raglab.report.format import fmt as _fmt
from raglab.report.run_report import (
    _md_escape,
    _table,
)


# ---- cells ----------------------------------------------------------------------------------
def signed(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.3f}"


def interval(r: dict) -> str:
    if r["ci_low"] is None or r["ci_high"] is None:
        return "n/a"
    return f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"


def pval(p: float | None) -> str:
    if p is None:
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def verdict(r: dict, info: dict) -> str:
    """``better``/``worse`` when significant after adjustment, ``not comparable``, or ''."""
    if not r["comparable"]:
        return "not comparable"
    if not info["significant"] or r["delta"] is None or info["direction"] == "none":
        return ""
    good = r["delta"] > 0 if info["direction"] == "higher" else r["delta"] < 0
    word = "better" if good else "worse"
    return f"{word} (exploratory)" if r.get("exploratory") else word


def slice_name(r: dict, info: dict | None = None) -> str:
    if r["slice"] is None:
        return "overall"
    name = f"{r['slice']['key']}={r['slice']['value']}"
    return name + (" (small)" if info and info["small"] else "")


def headline_names(comp) -> list[str]:
    return [m for m in HEADLINE if m in comp.metrics]


def _wtl(r: dict) -> str:
    return f"{r['wins']}/{r['ties']}/{r['losses']}"


def mean(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.3f}" if abs(v) < 1000 else f"{v:.0f}"


def _mde(r: dict) -> str:
    v = r.get("mde")
    return "n/a" if v is None else f"{v:.3f}"


def _row_cells(r: dict, info: dict) -> list[Any]:
    return [mean(r["baseline"]), mean(r["candidate"]), signed(r["delta"]), interval(r),
            pval(r["p_value"]), pval(r["p_adjusted"]), r["n"], _mde(r), _wtl(r),
            verdict(r, info)]


ROW_HEAD = ["baseline", "candidate", "delta", "CI", "p", "p adj.", "n", "MDE", "W/T/L", ""]

INTERVAL_WORDS = {
    "auto": "by metric kind: the score interval for pass/fail metrics (Tango's, corrected "
            "for skewness and discreteness; on the scaled gain and loss mass for shares), "
            "the bootstrap-t for unbounded graded metrics where many cases changed, the "
            "sign-flip inversion where few did and with clusters (docs: Statistics)",
    "signflip": "inversion of the paired sign-flip permutation test (the values of the "
                "difference the test does not reject, with the p-value's own sign vectors: "
                "an interval excludes 0 exactly when p <= {alpha:g})",
    "bca": "paired bootstrap, BCa where valid, percentile otherwise",
    "percentile": "paired bootstrap, percentile",
}


INTERVAL_SHORT = {"auto": "by-kind (score, bootstrap-t)", "signflip": "sign-flip",
                  "bca": "paired bootstrap (BCa)",
                  "percentile": "paired bootstrap (percentile)"}


def interval_words(s: dict) -> str:
    """How the intervals of a comparison were made, in words."""
    what = INTERVAL_WORDS.get(s.get("interval", "auto"), INTERVAL_WORDS["auto"])
    return what.format(alpha=1 - s["confidence"])


# ---- sections shared by md and html ---------------------------------------------------------
def method_lines(comp) -> list[str]:
    s = comp.settings
    lines = [
        f"Cases paired on case id: {s['n_cases']}. Each difference is candidate minus baseline "
        "over the cases where the metric applies in both runs (n); W/T/L counts the cases the "
        "candidate wins, ties and loses by the metric's direction.",
        f"Intervals ({s['confidence']:.0%}): {interval_words(s)}; {s['n_bootstrap']} "
        f"resamples, seed {s['seed']}. p-values: paired sign-flip permutation test from a "
        "fixed plan, so the same data give the same p whatever the seed (tails beyond the "
        "resamples' resolution from a saddlepoint approximation of the same distribution); "
        "for pass/fail metrics the score test the interval inverts (p < alpha exactly when "
        "the interval excludes 0).",
        f"p adj.: the confirmatory family, the headline metrics overall, is adjusted by "
        f"{s['adjust_name']} ({s['family_size']} tests); every other row (other metrics, "
        f"every slice) is exploratory, adjusted by "
        f"{s.get('adjust_exploratory_name', s['adjust_name'])} within its own family "
        f"({s.get('exploratory_size', 'n/a')} tests) and marked exploratory. Rows with the "
        f"same paired values (e.g. a slice that holds every case) are tested once "
        f"({s.get('aliased_rows', 0)} such aliases). A row whose paired differences are all "
        f"zero cannot reject and has p adj. 1; better/worse marks a difference significant at "
        f"{s['alpha']:g} after adjustment. MDE: the smallest true difference the two-sided "
        f"test detects with 80% power at {s['alpha']:g}: for pass/fail metrics the exact power "
        f"of the score test at the discordance the difference needs (never below the "
        f"observed; for shares, its normal approximation on the scaled mass), for other "
        f"graded metrics from the observed variance of the differences. Slices under "
        f"{s['min_slice_n']} cases are marked small.",
    ]
    if s.get("weighted"):
        lines.append(f"Weighted: every mean and statistic weighs the cases (effective sample "
                     f"size {s['n_eff']:.1f} of {s['n_cases']} cases).")
    if s.get("cluster"):
        lines.append(cluster_words(s) + ".")
    if s.get("unpaired_metrics"):
        lines.append("Not compared (reported by one run only, e.g. a cutoff beyond the other "
                     f"run's k): {', '.join(s['unpaired_metrics'])}.")
    return lines


def cluster_words(s: Mapping[str, Any]) -> str:
    """The method sentence on clusters of a comparison's ``settings`` ("" without)."""
    key, n = s.get("cluster"), s.get("n_clusters")
    if not key:
        return ""
    if key == "conversation":
        from raglab.compare.table import conversations_words

        return (f"Clustered by conversation ({conversations_words(n, s.get('n_untagged') or 0)})"
                ": the turns of one "
                "conversation are resampled and permuted together")
    return f"Clusters: cases sharing tag {key} ({n} clusters) are resampled and permuted together"


def _sections(comp) -> list[tuple[str, list[str], list[list[Any]]]]:
    """(title, header, rows) tables, in report order."""
    out = []
    head = headline_names(comp)
    rows = [[m, *_row_cells(comp.row(m), comp.info(m))] for m in head]
    out.append(("Headline metrics (overall)", ["metric", *ROW_HEAD], rows))
    for m in head:
        srows = []
        for r, info in zip(comp.rows, comp.row_info):
            if r["metric"] == m and r["slice"] is not None:
                srows.append([slice_name(r, info), *_row_cells(r, info)])
        if srows:
            out.append((f"{m} by slice", ["slice", *ROW_HEAD], srows))
    rest = [[r["metric"], *_row_cells(r, i)] for r, i in zip(comp.rows, comp.row_info)
            if r["slice"] is None and r["metric"] not in head]
    if rest:
        out.append(("All other metrics (overall)", ["metric", *ROW_HEAD], rest))
    return out


def _diag_tables(comp) -> list[tuple[str, list[str], list[list[Any]]]]:
    d = comp.diagnoses
    if not d:
        return []
    causes = sorted({c for role in d["overall"].values() for c in role})
    rows = [[c, d["overall"]["baseline"].get(c, 0), d["overall"]["candidate"].get(c, 0)]
            for c in causes]
    out = [("Diagnoses (cases per cause; a case may have several)",
            ["cause", "baseline", "candidate"], rows)]
    srows = []
    for k, vals in d["slices"].items():
        for v, roles in vals.items():
            for c in sorted({c for r in roles.values() for c in r}):
                srows.append([f"{k}={v}", c, roles["baseline"].get(c, 0),
                              roles["candidate"].get(c, 0)])
    if srows:
        out.append(("Diagnoses by slice", ["slice", "cause", "baseline", "candidate"], srows))
    return out


def _noise_tables(comp) -> list[tuple[str, list[str], list[list[Any]]]]:
    """Grader noise of each repeated metric's overall difference (grader.repeats > 1)."""
    noise = getattr(comp, "grader_noise", None) or {}
    if not noise:
        return []
    rows = []
    for m, x in noise.items():
        rep = ", ".join(r for r in ("baseline", "candidate") if x["repeated"][r]) or "neither"
        share = "n/a" if x["noise_share"] is None else f"{x['noise_share']:.0%}"
        rows.append([m, str(x["n"]), rep, f"{x['noise_se']:.4f}",
                     "n/a" if x["interval_se"] is None else f"{x['interval_se']:.4f}", share])
    return [("Grader noise (from grader.repeats: per-case variance over repeats)",
             ["metric", "n", "repeated in", "noise s.e. of delta", "interval s.e.",
              "share of the interval"], rows)]


def _diag_text(d: Any) -> str:
    if d is None:
        return "passed"
    if isinstance(d, dict):
        return ", ".join(map(str, d.get("causes") or [])) or "unspecified"
    return str(d)


def _flip_tables(comp) -> list[tuple[str, list[str], list[list[Any]]]]:
    out = []
    for metric, f in comp.flipped.items():
        for way, title in (("pass_to_fail", "pass to fail"), ("fail_to_pass", "fail to pass")):
            n = f[f"n_{way}"]
            cases = f[way]
            shown = "" if len(cases) == n else f", first {len(cases)} shown"
            rows = [[x["case_id"], x["question"] or "(question not found)", _fmt(x["baseline"]),
                     _fmt(x["candidate"]), x["baseline_answer"] or "(no answer)",
                     x["candidate_answer"] or "(no answer)", _diag_text(x["baseline_diagnosis"]),
                     _diag_text(x["candidate_diagnosis"])] for x in cases]
            cases_word = "case" if n == 1 else "cases"
            out.append((f"{metric}: {n} {cases_word} {title} "
                        f"(threshold {f['threshold']:g}{shown})",
                        ["case", "question", "baseline", "candidate", "baseline answer",
                         "candidate answer", "baseline diagnosis", "candidate diagnosis"], rows))
    return out


def _version_rows(comp) -> list[list[Any]]:
    vb, vc = comp.versions.get("baseline", {}), comp.versions.get("candidate", {})
    return [[f, vb.get(f, "n/a"), vc.get(f, "n/a"), "" if vb.get(f) == vc.get(f) else "DIFFERENT"]
            for f in sorted(set(vb) | set(vc))]


JUDGE_HEADER = ["family", "run", "version", "kappa [95% CI]", "labels", "labels sha256",
                "calibrated"]


def _yes_no(value: Any) -> str:
    return "not recorded" if value is None else ("YES" if value else "no")


def judge_tables(comp) -> list[tuple[str, list[str], list[list[Any]]]]:
    """The judges' section: each run's self-grading flag, then the latest calibration of
    every graded family's grader version (raglab.compare.trust)."""
    from raglab.compare.trust import calibration_rows, self_graded

    out = [("Judges", ["", "baseline", "candidate"],
            [["self-graded (grader's model is the system's)", _yes_no(self_graded(comp.baseline)),
              _yes_no(self_graded(comp.candidate))]])]
    cal = getattr(comp, "calibration", None)
    if cal:
        out.append(("Calibration of the graded families (latest per grader version)",
                    JUDGE_HEADER, calibration_rows(cal)))
    return out


def title(comp) -> str:
    return f"raglab compare: {comp.candidate.label} against {comp.baseline.label}"


def _run_line(role: str, src, paths=None) -> str:
    from raglab.compare.paths import shown

    where = f"MLflow run {src.mlflow_run_id}" if src.mlflow_run_id else \
        shown(str(src.run_dir), paths)
    return f"{role}: {src.label} ({where})"


# ---- markdown -------------------------------------------------------------------------------
def render_md(comp) -> str:
    lines = [f"# {_md_escape(title(comp))}", ""]
    for w in comp.warnings:
        lines.append(f"> **Warning:** {_md_escape(w)}")
    if comp.warnings:
        lines.append("")
    lines += [f"- {_md_escape(_run_line('baseline', comp.baseline, comp.paths))}",
              f"- {_md_escape(_run_line('candidate', comp.candidate, comp.paths))}", ""]
    lines += [*method_lines(comp), ""]
    from raglab.compare.human import ppi_tables

    sections = _sections(comp)
    for name, header, rows in [*sections[:1], *ppi_tables(comp), *sections[1:],
                               *_flip_tables(comp), *_diag_tables(comp), *_noise_tables(comp)]:
        lines += [f"## {_md_escape(name)}", ""]
        lines += _table(header, rows) if rows else ["(none)"]
        lines.append("")
    lines += ["## Metric versions", ""] + _table(["family", "baseline", "candidate", ""],
                                                 _version_rows(comp)) + [""]
    for name, header, rows in judge_tables(comp):
        lines += [f"## {_md_escape(name)}", ""] + _table(header, rows) + [""]
    lines += ["Every metric and slice is in compare.json; values that do not apply are n/a.", ""]
    return "\n".join(lines)


def render_terminal(comp) -> str:
    """The comparison for a terminal, each line escaped on its own (:func:`term`)."""
    lines = [title(comp)]
    lines += [f"WARNING: {w}" for w in comp.warnings]
    head = ["metric", "baseline", "candidate", "delta", "CI", "p adj.", "n", ""]
    rows = []
    for m in headline_names(comp):
        r, i = comp.row(m), comp.info(m)
        rows.append([m, mean(r["baseline"]), mean(r["candidate"]), signed(r["delta"]),
                     interval(r), pval(r["p_adjusted"]), str(r["n"]), verdict(r, i)])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in [head, *rows]:
        lines.append("  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    s = comp.settings
    lines.append(f"  {s['n_cases']} paired cases; {s['confidence']:.0%} "
                 f"{INTERVAL_SHORT.get(s.get('interval', 'auto'), 'bootstrap')} intervals; p "
                 f"adjusted ({s['adjust_name']}) over the {s['family_size']} headline tests")
    if s.get("clustering"):
        lines.append(f"  {s['clustering']}")
    for m in headline_names(comp):
        x = (getattr(comp, "grader_noise", None) or {}).get(m)
        if x and x["noise_share"] is not None:
            lines.append(f"  grader noise in {m}: s.e. {x['noise_se']:.4f}, "
                         f"{x['noise_share']:.0%} of the interval's")
    from raglab.compare.human import ppi_lines

    lines += ppi_lines(comp)
    lines += _calibration_lines(comp)
    from raglab.text.escape import term

    # each line made one terminal line: a run's label or a slice value may hold a line break
    # (under GitHub Actions, a line that starts '::' would be a workflow command)
    return "\n".join(term(line) for line in lines)


def _calibration_lines(comp) -> list[str]:
    """Each family's version with its kappa from raglab calibrate, or "uncalibrated"."""
    from raglab.calibration.records import version_lines
    from raglab.compare.trust import calibration_texts

    texts = calibration_texts(comp)
    if texts is not None:  # looked up already (raglab.compare.trust.attach)
        return version_lines(comp.versions.get("baseline", {}),
                             comp.versions.get("candidate", {}), None, texts=texts)

    cand = comp.candidate
    tracked = None
    if cand.tracking_uri:
        from raglab.tracking.standalone import calibration_finder

        tracked = calibration_finder(cand.tracking_uri)
    return version_lines(comp.versions.get("baseline", {}), comp.versions.get("candidate", {}),
                         (cand.config or {}).get("cache_dir") or ".raglab-cache", tracked)
