"""The HTML page of a comparison (``compare.html``) and its plots: reads a
:class:`~raglab.compare.comparison.Comparison` only, as the Markdown and terminal renderers
of :mod:`raglab.compare.render` do."""

from __future__ import annotations

import base64
import html
import io
from typing import Any

from raglab.compare.render import (
    _diag_tables,
    _flip_tables,
    _noise_tables,
    _run_line,
    _sections,
    _version_rows,
    judge_tables,
    method_lines,
    slice_name,
    title,
    verdict,
)
from raglab.report.run_report import RECALL_AT, _figure, plain_text, recall_axes
from raglab.text.escape import term

MAX_SLICE_PLOTS = 60     # slices drawn per difference plot (the largest ones)


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
    body += [f"<p>{e(_run_line('baseline', comp.baseline, comp.paths))}<br>"
             f"{e(_run_line('candidate', comp.candidate, comp.paths))}</p>"]
    body += [f"<p>{e(x)}</p>" for x in method_lines(comp)]
    sections = _sections(comp)
    name, header, rows = sections[0]
    body += [f"<h2>{e(name)}</h2>", html_table(header, rows, "headline")]
    from raglab.compare.human import ppi_tables

    for name, header, rows in ppi_tables(comp):
        body += [f"<h2>{e(name)}</h2>", html_table(header, rows, "metrics")]
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
