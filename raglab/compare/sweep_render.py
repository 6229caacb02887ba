"""Rendering a sweep comparison: one table per headline metric with the swept parameters as
rows x columns (two parameters), one row per job otherwise; heat maps in the HTML."""

from __future__ import annotations

import html
from typing import Any

from raglab.compare.comparison import ADJUST_NAMES
from raglab.compare.render import mean
from raglab.compare.render_html import _png, html_page, html_table, img
from raglab.report.run_report import _figure, _md_escape, _table

MARK = "*"


def _order(values: list[str]) -> list[str]:
    def key(v: str):
        try:
            return (0, float(v), v)
        except ValueError:
            return (1, 0.0, v)
    return sorted(set(values), key=key)


def cell_text(cell: dict | None, is_baseline: bool = False) -> str:
    if is_baseline:
        return "baseline"
    if cell is None or cell["delta"] is None:
        return "n/a"
    if not cell["comparable"]:
        return f"{cell['delta']:+.3f} (not comparable)"
    ci = "" if cell["ci_low"] is None else f" [{cell['ci_low']:+.3f}, {cell['ci_high']:+.3f}]"
    return f"{cell['delta']:+.3f}{ci}" + (f" {MARK}" if cell["significant"] else "")


def grid(sc, metric: str) -> tuple[list[str], list[list[str]], list[list[tuple]]]:
    """(header, text rows, value rows) of one metric's table; values are (job name, cell)."""
    cells = sc.cells.get(metric, {})
    by_params = {tuple(j.params.get(p) for p in sc.params): j for j in sc.jobs}
    if len(sc.params) == 2:
        p1, p2 = sc.params
        rows_v = _order([j.params[p1] for j in sc.jobs])
        cols_v = _order([j.params[p2] for j in sc.jobs])
        header = [f"{p1} \\ {p2}", *cols_v]
        text, vals = [], []
        for rv in rows_v:
            trow, vrow = [rv], []
            for cv in cols_v:
                job = by_params.get((rv, cv))
                name = job.name if job else None
                trow.append("" if job is None else
                            cell_text(cells.get(name), job is sc.baseline))
                vrow.append((name, cells.get(name) if name else None))
            text.append(trow)
            vals.append(vrow)
        return header, text, vals
    header = [*sc.params, "delta [CI]"] if sc.params else ["job", "delta [CI]"]
    text, vals = [], []
    for j in sc.jobs:
        lead = [j.params[p] for p in sc.params] if sc.params else [j.number]
        text.append([*lead, cell_text(cells.get(j.name), j is sc.baseline)])
        vals.append([(j.name, cells.get(j.name))])
    return header, text, vals


def _base_value(sc, metric: str) -> Any:
    for c in sc.cells.get(metric, {}).values():
        if c["baseline"] is not None:
            return c["baseline"]
    return None


def _interval_name(s: dict) -> str:
    from raglab.compare.render import INTERVAL_SHORT

    return INTERVAL_SHORT.get(s.get("interval", "bca"), "paired")


def intro(sc) -> list[str]:
    s = sc.settings
    return [f"Every job is compared with the baseline job {sc.baseline.name} on paired cases. "
            "Each cell is the candidate minus the baseline (overall) with its "
            f"{s['confidence']:.0%} {_interval_name(s)} interval; {MARK} marks a difference "
            f"significant at {s['alpha']:g} after {ADJUST_NAMES[s['adjust']]} "
            f"adjustment across every cell of these tables ({s['family_size']} tests).",
            *([f"Each job's comparison with the baseline is {_clustering(s['clustering'])}; "
               "the sweep-wide family is not clustered."] if s.get("clustering") else []),
            "Per-slice rows of every job are in compare.json (comparisons)."]


def _clustering(said: str | list[str]) -> str:
    return said if isinstance(said, str) else ", ".join(said)


def render_sweep_md(sc) -> str:
    lines = [f"# raglab compare: sweep {_md_escape(sc.shown_ref())} against "
             f"{_md_escape(sc.baseline.name)}",
             ""]
    lines += [f"> **Warning:** {_md_escape(w)}" for w in sc.warnings]
    if sc.warnings:
        lines.append("")
    lines += [*intro(sc), ""]
    lines += ["## Jobs", ""] + _table(["job", "name"], [[j.number, j.name] for j in sc.jobs])
    lines.append("")
    for metric in sc.cells:
        header, text, _ = grid(sc, metric)
        lines += [f"## {metric} (baseline {mean(_base_value(sc, metric))})", ""]
        lines += _table(header, text) + [""]
    lines += _family_md(sc)
    lines += _failing_md(sc)
    return "\n".join(lines)


def family_intro(sc) -> str:
    f = sc.family
    return (f"Every pair of jobs, each headline metric one family ({f['method']}, "
            f"{f['n_permutations']} permutations of the jobs within each case, seed "
            f"{f['seed']}): the best group is the best job by the metric's direction and "
            f"every job whose family-wise adjusted p-value against it is at least "
            f"{f['alpha']:g}, i.e. not separable from the best. Cases: the "
            f"{f['n_shared_cases']} every job has (a metric uses those where it applies in "
            "every job). Each pair's p-value is in compare.json (family.pairs).")


def group_text(sc, group: list[str]) -> str:
    """A best group's job names, or ``every job`` when no job is separable from the best."""
    return "every job" if len(group) == len(sc.jobs) else "; ".join(group)


def family_rows(sc) -> list[list[Any]]:
    """One row per metric: metric, best job (its mean), best group, size, cases."""
    f = sc.family
    rows = []
    for metric, group in f.get("best_group", {}).items():
        best = f["best"][metric]
        rows.append([metric, f"{best} ({mean(f['means'][metric][best])})", group_text(sc, group),
                     f"{len(group)} of {len(sc.jobs)}", f["n_cases"][metric]])
    return rows


FAMILY_HEADER = ["metric", "best job (mean)", "best group", "jobs", "cases"]


def _family_md(sc) -> list[str]:
    if not sc.family:
        return []
    lines = ["## Best group per metric (every pair of jobs, family-wise)", "",
             family_intro(sc), ""]
    rows = family_rows(sc)
    return lines + (_table(FAMILY_HEADER, rows) if rows else ["(no metric applies)"]) + [""]


def _failing_rows(sc) -> list[list[Any]]:
    return [[x["case_id"], x["question"] or "(question not found)", ", ".join(x["metrics"])]
            for x in sc.always_failing]


def _failing_md(sc) -> list[str]:
    lines = [f"## Cases that fail under every job ({len(sc.always_failing)})", "",
             "No configuration of the sweep passes these: review their labels or the corpus "
             "rather than tuning further.", ""]
    rows = _failing_rows(sc)
    return lines + (_table(["case", "question", "fails"], rows) if rows else ["(none)"]) + [""]


def heatmap(sc, metric: str) -> str | None:
    header, text, vals = grid(sc, metric)
    import numpy as np

    data = np.array([[np.nan if c is None or c["delta"] is None else c["delta"]
                      for _, c in row] for row in vals], dtype=float)
    if np.all(np.isnan(data)):
        data = np.where(np.isnan(data), 0.0, data)
    direction = next((c["direction"] for row in vals for _, c in row if c), "higher")
    sign = -1.0 if direction == "lower" else 1.0
    # colour scale: at least +-0.05, so a negligible difference is not drawn as a strong one
    lim = max(float(np.nanmax(np.abs(data))), 0.05)
    fig = _figure(1.6 + 1.3 * data.shape[1], 1.2 + 0.5 * data.shape[0])
    ax = fig.add_subplot(1, 1, 1)
    ax.imshow(sign * data, cmap="RdYlGn", vmin=-lim, vmax=lim, aspect="auto")
    for i, row in enumerate(vals):
        for j, (name, c) in enumerate(row):
            if name == sc.baseline.name:
                label = "base"
            elif c is None or c["delta"] is None:
                label = "n/a"
            else:
                label = f"{c['delta']:+.3f}" + (MARK if c["significant"] else "")
            ax.text(j, i, label, ha="center", va="center", fontsize=8)
    ax.set_xticks(range(data.shape[1]))
    ax.set_xticklabels(header[-data.shape[1]:] if len(sc.params) == 2 else ["delta"])
    ax.set_yticks(range(data.shape[0]))
    ax.set_yticklabels([",".join(map(str, t[:-1])) if len(sc.params) != 2 else t[0]
                        for t in text], fontsize=8)
    if len(sc.params) == 2:
        ax.set_xlabel(sc.params[1])
        ax.set_ylabel(sc.params[0])
    ax.set_title(f"{metric}: candidate - baseline (green: better)")
    return _png(fig)


def render_sweep_html(sc) -> str:
    e = html.escape
    body = [f"<h1>raglab compare: sweep {e(sc.shown_ref())} against "
            f"{e(sc.baseline.name)}</h1>"]
    body += [f'<div class="warn"><b>Warning:</b> {e(w)}</div>' for w in sc.warnings]
    body += [f"<p>{e(x)}</p>" for x in intro(sc)]
    body += ["<h2>Jobs</h2>", html_table(["job", "name"], [[j.number, j.name] for j in sc.jobs])]
    for metric in sc.cells:
        header, text, _ = grid(sc, metric)
        body.append(f"<h2>{e(metric)} (baseline {e(mean(_base_value(sc, metric)))})</h2>")
        body.append(html_table(header, text, "sweep"))
        b64 = heatmap(sc, metric)
        if b64:
            body.append(img(b64, f"{metric} heat map"))
    if sc.family:
        body += ["<h2>Best group per metric (every pair of jobs, family-wise)</h2>",
                 f"<p>{e(family_intro(sc))}</p>"]
        rows = family_rows(sc)
        body.append(html_table(FAMILY_HEADER, rows, "family") if rows
                    else "<p>(no metric applies)</p>")
    body.append(f"<h2>Cases that fail under every job ({len(sc.always_failing)})</h2>")
    rows = _failing_rows(sc)
    body.append(html_table(["case", "question", "fails"], rows, "cases") if rows
                else "<p>(none)</p>")
    return html_page(f"raglab compare: sweep against {sc.baseline.name}", body)


def render_sweep_terminal(sc, metrics: list[str]) -> str:
    lines = [f"raglab compare: sweep {sc.ref} against {sc.baseline.name}"]
    lines += [f"WARNING: {w}" for w in sc.warnings]
    for metric in metrics:
        if metric not in sc.cells:
            continue
        header, text, _ = grid(sc, metric)
        widths = [max(len(str(x)) for x in col) for col in zip(header, *text)]
        lines.append(f"{metric} (baseline {mean(_base_value(sc, metric))}):")
        for row in [header, *text]:
            lines.append("  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
        group = sc.family.get("best_group", {}).get(metric) if sc.family else None
        if group is not None:
            lines.append(f"  best group (family-wise, alpha {sc.family['alpha']:g}): "
                         + group_text(sc, group))
    lines.append(f"  {MARK}: significant after adjustment; {len(sc.always_failing)} cases fail "
                 "under every job")
    if sc.settings.get("clustering"):  # conversations (clustered by default) or compare.cluster
        lines.append(f"  each job's comparison {_clustering(sc.settings['clustering'])}; "
                     "the best group is not clustered")
    return "\n".join(lines)


__all__ = ["render_sweep_md", "render_sweep_html", "render_sweep_terminal", "grid"]
