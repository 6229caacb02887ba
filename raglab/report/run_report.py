"""The report of one run: ``report.md`` plus PNG plots, written next to ``metrics.json``.

Reads ``metrics.json`` (and ``config.yaml`` when present) only. Null metrics print as ``n/a``
and are left out of plots; a plot with nothing to show is not written. matplotlib is imported
lazily and used through its Agg canvas (no pyplot, no global backend switch).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

from raglab.data.io import atomic_write_text, read_run_config, read_run_metrics
from raglab.errors import UserError
from raglab.metrics.catalog import HEADLINE
from raglab.report.format import fmt, num
SLICE_METRICS = ["final.evidence_recall", "faithfulness", "vital_nugget_recall",
                 "false_refusal_rate", "false_answer_rate", "acl_leak_rate"]
MAX_PLOTTED_SLICES = 40
_RECALL_AT = re.compile(r"^(candidate|final)\.evidence_recall@(\d+)$")


def _md_escape(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(_md_escape(h) for h in header) + " |",
           "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
    return out


def _write_atomic(path: Path, data: str | bytes) -> None:
    if isinstance(data, str):
        atomic_write_text(path, data)
        return
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _load(run_dir: Path) -> tuple[dict, dict]:
    metrics = read_run_metrics(run_dir)
    try:
        cfg = read_run_config(run_dir)
    except UserError:  # the report needs only metrics.json; a broken config names no k
        cfg = {}
    return metrics, cfg


def _headline_names(overall: Mapping[str, Any], cfg: Mapping[str, Any]) -> list[str]:
    names = list(HEADLINE)
    k = cfg.get("k")
    if isinstance(k, int):  # the recall/ndcg at the configured k, when reported
        at = names.index("final.evidence_recall") + 1
        names[at:at] = [f"final.evidence_recall@{k}", f"final.ndcg@{k}"]
    return [n for n in names if n in overall]


def _slice_rows(slices: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    rows = []
    for tag_key, values in sorted((slices or {}).items(), key=lambda kv: str(kv[0])):
        for tag_value, mets in sorted((values or {}).items(), key=lambda kv: str(kv[0])):
            rows.append((str(tag_key), str(tag_value), mets or {}))
    return rows


def _markdown(run_dir: Path, m: Mapping[str, Any], cfg: Mapping[str, Any],
              plots: list[Path]) -> str:
    overall = m.get("overall") or {}
    ds = cfg.get("dataset") if isinstance(cfg.get("dataset"), Mapping) else {}
    title = cfg.get("run_name") or run_dir.name
    lines = [f"# raglab run report: {_md_escape(title)}", ""]
    lines += [f"- dataset: {_md_escape(ds.get('name', 'n/a'))}",
              f"- cases scored: {fmt(m.get('n_cases'))}",
              f"- cases quarantined: {fmt(m.get('n_quarantined'))}",
              f"- cases with errors: {fmt(m.get('errors'))}", ""]
    head = _headline_names(overall, cfg)
    lines += ["## Headline metrics", ""]
    lines += _table(["metric", "value"], [[n, fmt(overall.get(n))] for n in head]) \
        if head else ["(no headline metric in this run)"]
    lines += [""]
    lines += _diagnosis_lines(m.get("diagnoses"))
    if plots:
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    versions = m.get("metric_versions") or {}
    if versions:
        lines += ["## Metric versions", ""]
        lines += _table(["family", "version"], [[f, v] for f, v in sorted(versions.items())])
        lines += [""]
    work = m.get("work") or {}
    if work:
        lines += ["## Work done by this run (not taken from a cache)", ""]
        lines += _table(["counter", "count"], [[k, fmt(v)] for k, v in work.items()])
        lines += [""]
    rows = _slice_rows(m.get("slices") or {})
    cols = [c for c in SLICE_METRICS if any(c in mets for _, _, mets in rows)]
    if rows:
        lines += ["## Slices", ""]
        lines += _table(["tag", "value", "n", *cols],
                        [[k, v, fmt(mets.get("n")), *(fmt(mets.get(c)) for c in cols)]
                         for k, v, mets in rows])
        lines += [""]
    rest = sorted(n for n in overall if n not in head)
    if rest:
        lines += ["## All other metrics", ""]
        lines += _table(["metric", "value"], [[n, fmt(overall.get(n))] for n in rest])
        lines += [""]
    lines += ["Metrics that do not apply to any case are shown as n/a.", ""]
    return "\n".join(lines)


def _diagnosis_lines(diag: Any) -> list[str]:
    """The failure attribution section: cases per cause overall, then per slice."""
    if not isinstance(diag, Mapping):
        return []
    overall = diag.get("overall") or {}
    primary = diag.get("primary") or {}
    lines = ["## Failure attribution", "",
             f"Cases with a diagnosis: {fmt(diag.get('failed', 0))}. A case counts once per "
             "cause it has; `primary` counts it once, under its first cause.", ""]
    causes = [c for c in overall if overall.get(c) or primary.get(c)]
    if not causes:
        return lines + ["(no case failed a check)", ""]
    lines += _table(["cause", "cases", "primary"],
                    [[c, fmt(overall.get(c)), fmt(primary.get(c, 0))] for c in causes])
    lines += [""]
    rows = [(k, v, counts) for k, v, counts in _slice_rows(diag.get("slices") or {})
            if any((counts or {}).get(c) for c in causes)]
    if rows:
        lines += ["### By slice", ""]
        lines += _table(["tag", "value", *causes],
                        [[k, v, *(fmt(counts.get(c, 0)) for c in causes)]
                         for k, v, counts in rows])
        lines += [""]
    return lines


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, format="png", bbox_inches="tight")
    os.replace(tmp, path)


def plot_recall_at_k(overall: Mapping[str, Any], path: Path) -> bool:
    """evidence_recall@k vs k for both stages; False (nothing written) when no data."""
    series: dict[str, list[tuple[int, float]]] = {}
    for name, value in overall.items():
        match = _RECALL_AT.match(str(name))
        v = num(value)
        if match and v is not None:
            series.setdefault(match.group(1), []).append((int(match.group(2)), v))
    if not series:
        return False
    fig = _figure(6, 4)
    ax = fig.add_subplot(1, 1, 1)
    cutoffs: set[int] = set()
    for stage in ("candidate", "final"):
        points = sorted(series.get(stage, []))
        if points:
            xs, ys = zip(*points)
            cutoffs.update(xs)
            ax.plot(xs, ys, marker="o", label=f"{stage} (before reranking)"
                    if stage == "candidate" else "final (reached the generator)")
    ax.set_xscale("log")
    ax.set_xticks(sorted(cutoffs))
    ax.set_xticklabels([str(c) for c in sorted(cutoffs)])
    ax.minorticks_off()
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("cutoff k")
    ax.set_ylabel("evidence recall@k")
    ax.set_title("Evidence recall by cutoff")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    _save(fig, path)
    return True


def plot_slices(slices: Mapping[str, Any], path: Path) -> bool:
    """Horizontal bars of headline metrics by slice; False (nothing written) when no data."""
    rows = _slice_rows(slices)
    cols = [c for c in SLICE_METRICS
            if any(num(mets.get(c)) is not None for _, _, mets in rows)]
    if not cols:
        return False
    rows = [r for r in rows if any(num(r[2].get(c)) is not None for c in cols)]
    if len(rows) > MAX_PLOTTED_SLICES:  # keep the largest slices, in their sorted order
        keep = sorted(rows, key=lambda r: -(num(r[2].get("n")) or 0))[:MAX_PLOTTED_SLICES]
        rows = [r for r in rows if r in keep]
    bar = 0.8 / len(cols)
    fig = _figure(8, min(30.0, max(2.5, 0.18 * len(rows) * len(cols) + 1.5)))
    ax = fig.add_subplot(1, 1, 1)
    for j, col in enumerate(cols):
        ys = [i + (j - (len(cols) - 1) / 2) * bar for i in range(len(rows))]
        xs = [num(mets.get(col)) or 0.0 for _, _, mets in rows]
        ax.barh(ys, xs, height=bar, label=col)
    labels = []
    for k, v, mets in rows:
        n = num(mets.get("n"))
        labels.append(f"{k}={v}" + (f" (n={int(n)})" if n is not None else ""))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.0)
    ax.set_xlabel("value (missing bars: metric does not apply)")
    ax.set_title("Headline metrics by slice")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    _save(fig, path)
    return True


def write_run_report(run_dir: Path, plots: bool = True) -> list[Path]:
    """Write report.md (+ recall_at_k.png, slices.png when they have data); return the paths.
    ``plots=False`` skips drawing (matplotlib is not imported) and the report says how to
    draw them later (``python -m raglab.report.run_report RUN_DIR``)."""
    run_dir = Path(run_dir)
    metrics, cfg = _load(run_dir)
    draw, plots = plots, []
    recall_png, slices_png = run_dir / "recall_at_k.png", run_dir / "slices.png"
    for path, plot, data in ((recall_png, plot_recall_at_k, metrics.get("overall")),
                             (slices_png, plot_slices, metrics.get("slices"))):
        if draw and plot(data or {}, path):
            plots.append(path)
        else:
            path.unlink(missing_ok=True)  # no stale plot from an earlier report
    report = run_dir / "report.md"
    text = _markdown(run_dir, metrics, cfg, plots)
    if not draw:
        text += ("\nPlots were not drawn for this run (a large run draws them on demand): "
                 f"`python -m raglab.report.run_report {run_dir}`\n")
    _write_atomic(report, text)
    return [report, *plots]


def ensure_run_report(run_dir: Path) -> list[Path]:
    """The run's report files: the ones already written for its current metrics.json, or
    freshly written ones (so a tracked run does not draw its plots twice)."""
    run_dir = Path(run_dir)
    report, metrics = run_dir / "report.md", run_dir / "metrics.json"
    if report.is_file() and metrics.is_file() and \
            report.stat().st_mtime_ns >= metrics.stat().st_mtime_ns:
        return [report, *(p for p in (run_dir / "recall_at_k.png", run_dir / "slices.png")
                          if p.is_file())]
    return write_run_report(run_dir)


if __name__ == "__main__":  # draw a run's report with its plots: python -m ... RUN_DIR
    import sys

    for p in write_run_report(Path(sys.argv[1])):
        print(p)
