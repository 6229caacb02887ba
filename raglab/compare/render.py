"""Rendering a :class:`~raglab.compare.comparison.Comparison`: ``compare.md``, a self-contained
``compare.html`` (inline CSS, plots as base64 PNG, no script, no external file) and the
terminal's headline table. matplotlib is imported lazily (Agg canvas, no pyplot)."""

from __future__ import annotations

import base64
import html
import io
from typing import Any

from raglab.metrics.catalog import HEADLINE
from raglab.report.format import fmt as _fmt
from raglab.report.run_report import (
    RECALL_AT,
    _figure,
    _md_escape,
    _table,
    plain_text,
    recall_axes,
)
from raglab.text.escape import term

MAX_SLICE_PLOTS = 60     # slices drawn per difference plot (the largest ones)


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
    "signflip": "inversion of the paired sign-flip permutation test (the values of the "
                "difference the test does not reject, with the p-value's own sign vectors: "
                "an interval excludes 0 exactly when p <= {alpha:g}, but for pass/fail "
                "metrics, whose p is McNemar's exact test and may differ within Monte Carlo "
                "error)",
    "bca": "paired bootstrap, BCa where valid, percentile otherwise",
    "percentile": "paired bootstrap, percentile",
}


INTERVAL_SHORT = {"signflip": "sign-flip", "bca": "paired bootstrap (BCa)",
                  "percentile": "paired bootstrap (percentile)"}


def interval_words(s: dict) -> str:
    """How the intervals of a comparison were made, in words."""
    what = INTERVAL_WORDS.get(s.get("interval", "bca"), INTERVAL_WORDS["bca"])
    return what.format(alpha=1 - s["confidence"])


# ---- sections shared by md and html ---------------------------------------------------------
def method_lines(comp) -> list[str]:
    s = comp.settings
    lines = [
        f"Cases paired on case id: {s['n_cases']}. Each difference is candidate minus baseline "
        "over the cases where the metric applies in both runs (n); W/T/L counts the cases the "
        "candidate wins, ties and loses by the metric's direction.",
        f"Intervals ({s['confidence']:.0%}): {interval_words(s)}; {s['n_bootstrap']} "
        f"resamples, seed {s['seed']}. p-values: paired sign-flip permutation test (tails "
        "beyond the resamples' resolution from a saddlepoint approximation of the same "
        "distribution); exact McNemar for pass/fail metrics.",
        f"p adj.: the confirmatory family, the headline metrics overall, is adjusted by "
        f"{s['adjust_name']} ({s['family_size']} tests); every other row (other metrics, "
        f"every slice) is exploratory, adjusted by "
        f"{s.get('adjust_exploratory_name', s['adjust_name'])} within its own family "
        f"({s.get('exploratory_size', 'n/a')} tests) and marked exploratory. Rows with the "
        f"same paired values (e.g. a slice that holds every case) are tested once "
        f"({s.get('aliased_rows', 0)} such aliases). A row whose paired differences are all "
        f"zero cannot reject and has p adj. 1; better/worse marks a difference significant at "
        f"{s['alpha']:g} after adjustment. MDE: the smallest true difference the two-sided "
        f"test detects with 80% power at {s['alpha']:g}, from the observed variance of the "
        f"differences. Slices under {s['min_slice_n']} cases are marked small.",
    ]
    if s.get("weighted"):
        lines.append(f"Weighted: every mean and statistic weighs the cases (effective sample "
                     f"size {s['n_eff']:.1f} of {s['n_cases']} cases).")
    if s.get("cluster"):
        lines.append(f"Clusters: cases sharing tag {s['cluster']} ({s['n_clusters']} clusters) "
                     "are resampled and permuted together.")
    if s.get("unpaired_metrics"):
        lines.append("Not compared (reported by one run only, e.g. a cutoff beyond the other "
                     f"run's k): {', '.join(s['unpaired_metrics'])}.")
    return lines


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


def _run_line(role: str, src) -> str:
    where = f"MLflow run {src.mlflow_run_id}" if src.mlflow_run_id else str(src.run_dir)
    return f"{role}: {src.label} ({where})"


# ---- markdown -------------------------------------------------------------------------------
def render_md(comp) -> str:
    lines = [f"# {_md_escape(title(comp))}", ""]
    for w in comp.warnings:
        lines.append(f"> **Warning:** {_md_escape(w)}")
    if comp.warnings:
        lines.append("")
    lines += [f"- {_md_escape(_run_line('baseline', comp.baseline))}",
              f"- {_md_escape(_run_line('candidate', comp.candidate))}", ""]
    lines += [*method_lines(comp), ""]
    for name, header, rows in [*_sections(comp), *_flip_tables(comp), *_diag_tables(comp),
                               *_noise_tables(comp)]:
        lines += [f"## {_md_escape(name)}", ""]
        lines += _table(header, rows) if rows else ["(none)"]
        lines.append("")
    lines += ["## Metric versions", ""] + _table(["family", "baseline", "candidate", ""],
                                                 _version_rows(comp)) + [""]
    for name, header, rows in judge_tables(comp):
        lines += [f"## {_md_escape(name)}", ""] + _table(header, rows) + [""]
    lines += ["Every metric and slice is in compare.json; values that do not apply are n/a.", ""]
    return "\n".join(lines)


# ---- plots ----------------------------------------------------------------------------------
def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


@plain_text
def plot_slice_deltas(comp, metric: str) -> str | None:
    """Each slice's difference with its interval (a forest plot), as base64 PNG."""
    pts = [(r, i) for r, i in zip(comp.rows, comp.row_info)
           if r["metric"] == metric and r["delta"] is not None and r["ci_low"] is not None]
    if not pts:
        return None
    overall = [p for p in pts if p[0]["slice"] is None]
    rest = sorted((p for p in pts if p[0]["slice"] is not None), key=lambda p: -p[1]["slice_n"])
    rest = sorted(rest[:MAX_SLICE_PLOTS], key=lambda p: slice_name(p[0]))
    pts = overall + rest
    fig = _figure(7, max(2.0, 0.28 * len(pts) + 1.2))
    ax = fig.add_subplot(1, 1, 1)
    groups: dict[tuple[str, bool], list[int]] = {}
    for y, (r, i) in enumerate(pts):   # one errorbar call per colour (fast with many slices)
        color = {"better": "tab:green", "worse": "tab:red"}.get(verdict(r, i), "tab:gray")
        groups.setdefault((color, bool(i["small"])), []).append(y)
    for (color, small), ys in groups.items():
        d = [pts[y][0]["delta"] for y in ys]
        lo = [pts[y][0]["delta"] - pts[y][0]["ci_low"] for y in ys]
        hi = [pts[y][0]["ci_high"] - pts[y][0]["delta"] for y in ys]
        ax.errorbar(d, ys, xerr=[lo, hi], fmt="o", color=color, capsize=3,
                    alpha=0.45 if small else 1.0, linestyle="none")
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(pts)))
    ax.set_yticklabels([f"{term(slice_name(r, i))} (n={r['n']})" for r, i in pts], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"candidate - baseline ({comp.settings['confidence']:.0%} interval)")
    ax.set_title(f"{metric}: difference by slice")
    ax.grid(True, axis="x", alpha=0.3)
    return _png(fig)


def _recall_series(comp) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """(stage, role) -> [(cutoff, recall)]: each run's own curve (its metrics.json), so a
    cutoff beyond the other run's k is drawn too; paired means when metrics.json is gone."""
    series: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for role in ("baseline", "candidate"):
        overall = (getattr(comp, role).metrics or {}).get("overall") or {}
        pairs = [(k, v) for k, v in overall.items() if v is not None]
        if not pairs:
            pairs = [(r["metric"], r[role]) for r in comp.rows
                     if r["slice"] is None and r[role] is not None]
        for name, v in pairs:
            m = RECALL_AT.match(str(name))
            if m and isinstance(v, int | float):
                series.setdefault((m.group(1), role), []).append((int(m.group(2)), float(v)))
    return series


@plain_text
def plot_recall(comp) -> str | None:
    """Evidence recall at every cutoff, both stages, both runs."""
    series = _recall_series(comp)
    if not series:
        return None
    fig = _figure(6.5, 4)
    ax = fig.add_subplot(1, 1, 1)
    cutoffs: set[int] = set()
    colors = {"baseline": "tab:gray", "candidate": "tab:blue"}
    styles = {"candidate": ("--", "s"), "final": ("-", "o")}
    for (stage, role), pts in sorted(series.items()):
        xs, ys = zip(*sorted(pts))
        cutoffs.update(xs)
        line, marker = styles[stage]
        label = term(f"{role} ({getattr(comp, role).label}), {stage}")
        ax.plot(xs, ys, line, marker=marker, color=colors[role], label=label[:70],
                alpha=0.85, markersize=6 if role == "baseline" else 4)
    recall_axes(ax, cutoffs, "cutoff k (candidate: before reranking; final: reached the "
                "generator)", "Evidence recall by cutoff: both stages, both runs",
                fontsize="small")
    return _png(fig)


# ---- html -----------------------------------------------------------------------------------
CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.9em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.better{color:#137333;font-weight:bold}
td.worse{color:#b3261e;font-weight:bold}.warn{background:#fff4e5;border:1px solid #f0a000;
padding:0.6em;margin:0.4em 0}img{max-width:100%}figure{margin:1em 0}"""


def html_table(header: list[str], rows: list[list[Any]], cls: str = "") -> str:
    out = [f'<table class="{cls}"><thead><tr>' + "".join(f"<th>{html.escape(str(h))}</th>"
                                                        for h in header) + "</tr></thead><tbody>"]
    for row in rows:
        cells = []
        for c in row:
            text = html.escape(str(c))
            klass = f' class="{c}"' if c in ("better", "worse") else ""
            cells.append(f"<td{klass}>{text}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def html_page(page_title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(page_title)}</title><style>{CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")


def img(b64: str, alt: str) -> str:
    return (f'<figure><img class="plot" alt="{html.escape(alt)}" '
            f'src="data:image/png;base64,{b64}"></figure>')


def render_html(comp) -> str:
    e = html.escape
    body = [f"<h1>{e(title(comp))}</h1>"]
    body += [f'<div class="warn"><b>Warning:</b> {e(w)}</div>' for w in comp.warnings]
    body += [f"<p>{e(_run_line('baseline', comp.baseline))}<br>"
             f"{e(_run_line('candidate', comp.candidate))}</p>"]
    body += [f"<p>{e(x)}</p>" for x in method_lines(comp)]
    sections = _sections(comp)
    name, header, rows = sections[0]
    body += [f"<h2>{e(name)}</h2>", html_table(header, rows, "headline")]
    recall = plot_recall(comp)
    if recall:
        body += ["<h2>Evidence recall by cutoff</h2>", img(recall, "recall at every cutoff")]
    for name, header, rows in sections[1:]:
        metric = name[:-len(" by slice")] if name.endswith(" by slice") else None
        body.append(f"<h2>{e(name)}</h2>")
        if metric:
            b64 = plot_slice_deltas(comp, metric)
            if b64:
                body.append(img(b64, f"{metric} difference by slice"))
        body.append(html_table(header, rows, "metrics"))
    for name, header, rows in [*_flip_tables(comp), *_diag_tables(comp), *_noise_tables(comp)]:
        body.append(f"<h2>{e(name)}</h2>")
        body.append(html_table(header, rows, "cases") if rows else "<p>(none)</p>")
    body += ["<h2>Metric versions</h2>",
             html_table(["family", "baseline", "candidate", ""], _version_rows(comp))]
    for name, header, rows in judge_tables(comp):
        body += [f"<h2>{e(name)}</h2>", html_table(header, rows)]
    body.append("<p>Every metric and slice is in compare.json; values that do not apply "
                "are n/a.</p>")
    return html_page(title(comp), body)


# ---- terminal -------------------------------------------------------------------------------
def render_terminal(comp) -> str:
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
                 f"{INTERVAL_SHORT.get(s.get('interval', 'bca'), 'bootstrap')} intervals; p "
                 f"adjusted ({s['adjust_name']}) over the {s['family_size']} headline tests")
    for m in headline_names(comp):
        x = (getattr(comp, "grader_noise", None) or {}).get(m)
        if x and x["noise_share"] is not None:
            lines.append(f"  grader noise in {m}: s.e. {x['noise_se']:.4f}, "
                         f"{x['noise_share']:.0%} of the interval's")
    lines += _calibration_lines(comp)
    return "\n".join(lines)


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
