"""Self-contained HTML reports: one file, plots embedded as base64 PNG, no script, no
stylesheet or font fetched from anywhere, so MLflow's artifact viewer (or any browser,
offline) shows the whole report. Used for a run's ``report.html`` and a sweep's
``sweep.html``."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from raglab.data.io import atomic_write_text
from raglab.report import conversations, human_scale, sequential_run
from raglab.report.summary import (
    FALLBACK_TITLE,
    arrow,
    better_words,
    config_outline,
    fallback_rows,
    fmt,
    headline_names,
    report_headline,
    self_graded_text,
    show_value,
)

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;
color:#1f2328;max-width:1200px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid
#d0d7de;padding-bottom:4px}
table{border-collapse:collapse;margin:6px 0 12px}th,td{border:1px solid #d0d7de;
padding:3px 8px;text-align:left;vertical-align:top}th{background:#f6f8fa}
td.num{text-align:right;font-variant-numeric:tabular-nums}td.na{color:#888;background:#f4f4f4}
.sub{color:#57606a;margin:0 0 12px}img{max-width:100%;height:auto;border:1px solid #d0d7de}
code{background:#f6f8fa;padding:0 3px}details{margin:8px 0}
""".strip()


def page(title: str, body: Sequence[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def table(header: Sequence[str], rows: Sequence[Sequence[Any]],
          numeric_from: int | None = None, cls: str = "") -> str:
    """An HTML table; columns from ``numeric_from`` on are right-aligned, ``n/a`` greyed."""
    out = [f"<table class=\"{escape(cls)}\"><thead><tr>"
           + "".join(f"<th>{escape(str(h))}</th>" for h in header) + "</tr></thead><tbody>"]
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            text = str(c)
            klass = "na" if text == "n/a" else ("num" if numeric_from is not None
                                                 and i >= numeric_from else "")
            cells.append(f"<td class=\"{klass}\">{escape(text)}</td>" if klass
                         else f"<td>{escape(text)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def embedded_png(path: Path, alt: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f"<img alt=\"{escape(alt)}\" src=\"data:image/png;base64,{data}\">"


def run_report_html(title: str, metrics: Mapping[str, Any], cfg: Mapping[str, Any],
                    diffs: Sequence[tuple[str, Any, Any]] | None, plots: Sequence[Path],
                    head: Sequence[str] | None = None) -> str:
    overall = metrics.get("overall") or {}
    ds = cfg["dataset"] if isinstance(cfg.get("dataset"), Mapping) else {}
    body = [f"<h1>{escape(title)}</h1>",
            f"<p class=\"sub\">raglab run report · dataset {escape(str(ds.get('name', 'n/a')))}"
            f" · {fmt(metrics.get('n_cases'))} cases scored · "
            f"{fmt(metrics.get('n_quarantined'))} quarantined · "
            f"{fmt(metrics.get('errors'))} with errors</p>",
            f"<p>self-graded: {escape(self_graded_text(metrics))}</p>",
            *([f"<p>weighted: every mean weighs the cases (effective sample size "
               f"{metrics.get('n_eff', 0):.1f} of {fmt(metrics.get('n_cases'))})</p>"]
              if metrics.get("weighted") else []),
            *([f"<p>{escape(sequential_run.headline(metrics['sequential']))}</p>"]
              if metrics.get("sequential") else []),
            "<h2>Configuration</h2>"]
    outline = config_outline(cfg)
    if outline:
        body.append(table(["part", "choice"], outline))
    if diffs:
        body.append("<p>Differences from the shipped defaults:</p>")
        body.append(table(["key", "default", "this run"],
                          [[k, show_value(d), show_value(v)] for k, d, v in diffs]))
    elif diffs is not None:
        body.append("<p>The shipped defaults, unchanged.</p>")
    names = list(head) if head is not None else headline_names(overall)
    body.append("<h2>Headline metrics</h2>")
    if names:
        body.append(table(["metric", "value", "better"],
                          [[n, fmt(overall.get(n)), f"{arrow(n)} {better_words(n)}".strip()]
                           for n in names], numeric_from=1))
    else:
        body.append("<p>(no headline metric in this run)</p>")
    body += _diagnosis(metrics.get("diagnoses"))
    body += conversations.html(metrics.get("conversations"), table)
    body += human_scale.html(metrics.get("ppi"), table)
    body += sequential_run.html(metrics.get("sequential"), table)
    for p in plots:
        body.append(f"<h2>{'Evidence recall by cutoff' if 'recall' in p.stem else 'Slices'}"
                    "</h2>")
        body.append(embedded_png(p, p.stem))
    versions = metrics.get("metric_versions") or {}
    if versions:
        body.append("<h2>Metric versions</h2>")
        body.append(table(["family", "version"], sorted(versions.items())))
    work = metrics.get("work") or {}
    if work:
        body.append("<h2>Work done by this run (not taken from a cache)</h2>")
        body.append(table(["counter", "count"], [[k, fmt(v)] for k, v in work.items()],
                          numeric_from=1))
    if fallback_rows(metrics):
        body.append(f"<h2>{FALLBACK_TITLE}</h2>")
        body.append(table(["counter", "meaning", "count"], fallback_rows(metrics),
                          numeric_from=2))
    rest = sorted(n for n in overall if n not in names)
    if rest:
        body.append(f"<details><summary>All other metrics ({len(rest)})</summary>")
        body.append(table(["metric", "value", "better"],
                          [[n, fmt(overall.get(n)), arrow(n)] for n in rest], numeric_from=1))
        body.append("</details>")
    body.append("<p class=\"sub\">n/a: the metric does not apply to any case (not 0). "
                "Every metric by slice is in metrics.json.</p>")
    return page(title, body)


def _diagnosis(diag: Any) -> list[str]:
    """Failure attribution (as in report.md): cases per cause, and once under the first."""
    if not isinstance(diag, Mapping):
        return []
    overall, primary = diag.get("overall") or {}, diag.get("primary") or {}
    out = ["<h2>Failure attribution</h2>",
           f"<p>Cases with a diagnosis: {fmt(diag.get('failed', 0))}. A case counts once per "
           "cause it has; <code>primary</code> counts it once, under its first cause.</p>"]
    causes = [c for c in overall if overall.get(c) or primary.get(c)]
    if not causes:
        return out + ["<p>(no case failed a check)</p>"]
    return out + [table(["cause", "cases", "primary"],
                        [[c, fmt(overall.get(c)), fmt(primary.get(c, 0))] for c in causes],
                        numeric_from=1)]


def write_report_html(run_dir: Path, title: str, metrics: Mapping[str, Any],
                      cfg: Mapping[str, Any], diffs: Sequence[tuple[str, Any, Any]] | None,
                      plots: Sequence[Path]) -> Path:
    path = Path(run_dir) / "report.html"
    head = report_headline(metrics.get("overall") or {}, cfg.get("k"))
    atomic_write_text(path, run_report_html(title, metrics, cfg, diffs, plots, head))
    return path


def sweep_html(title: str, header: Sequence[str], rows: Sequence[Sequence[str]],
               n_keys: int, sweep_dir: str) -> str:
    """The sweep's job table as a page (``n_keys``: how many swept-key columns)."""
    body = [f"<h1>{escape(title)}</h1>",
            f"<p class=\"sub\">{len(rows)} jobs in <code>{escape(sweep_dir)}</code> · "
            "↑ higher is better, ↓ lower is better · n/a: does not apply</p>",
            table(header, rows, numeric_from=1 + n_keys, cls="jobs")]
    return page(title, body)
