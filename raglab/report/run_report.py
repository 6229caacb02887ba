"""The report of one run: ``report.md`` and a self-contained ``report.html`` plus PNG
plots, written next to ``metrics.json``.

Reads ``metrics.json`` (and ``config.yaml`` when present) only. Both reports are titled by
the run's name and open with its configuration. Null metrics print as ``n/a``; in the slices
plot a metric that does not apply is a grey ``n/a`` cell, distinct from 0. A plot with
nothing to show is not written. matplotlib is imported lazily and used through its Agg
canvas (no pyplot, no global backend switch). The headline set and each metric's better
direction come from :mod:`raglab.metrics.catalog`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from raglab.data.io import (
    atomic_write_chunks,
    atomic_write_text,
    read_run_config,
    read_run_metrics,
)
from raglab.errors import UserError
from raglab.metrics.catalog import STAGES, spec_of
from raglab.report import conversations, human_scale, sequential_run
from raglab.report.format import fmt, num
from raglab.report.summary import (
    FALLBACK_TITLE,
    _md,
    arrow,
    config_outline,
    fallback_rows,
    headline_names,
    md_table,
    report_headline,
    self_graded_text,
    show_value,
)
from raglab.secrets import redact
from raglab.text.escape import term

MAX_PLOTTED_SLICES = 40
#: ``STAGE.evidence_recall@K`` metric names
RECALL_AT = re.compile(rf"^({'|'.join(STAGES)})\.evidence_recall@(\d+)$")


# one Markdown table writer for every report (compare and decide import these names)
_md_escape, _table = _md, md_table


def _write_atomic(path: Path, data: str | bytes) -> None:
    atomic_write_text(path, data)


def _load(run_dir: Path, config: dict | None = None) -> tuple[dict, dict]:
    """metrics.json, and the (redacted) configuration: ``config`` when the caller has it,
    else config.yaml read back."""
    metrics = read_run_metrics(run_dir)
    if config is not None:
        return metrics, redact(config)
    try:
        cfg = redact(read_run_config(run_dir))
    except UserError:  # the report needs only metrics.json; a broken config names no k
        cfg = {}
    return metrics, cfg


def _headline_names(overall: Mapping[str, Any], cfg: Mapping[str, Any]) -> list[str]:
    return report_headline(overall, cfg.get("k"))


def slice_columns(rows: list[tuple[str, str, Mapping[str, Any]]]) -> list[str]:
    """The headline metrics reported for at least one slice."""
    present = {c for _, _, mets in rows for c in mets}
    return [c for c in headline_names({c: None for c in present})]


def run_title(run_dir: Path, cfg: Mapping[str, Any], name: str | None) -> str:
    return str(name or cfg.get("run_name") or Path(run_dir).absolute().name)


def config_rows(cfg: Mapping[str, Any], diffs: list | None) -> tuple[list, list]:
    """``(outline rows, difference rows)`` of the configuration section."""
    outline = [[g, v] for g, v in config_outline(cfg)]
    changed = [[k, show_value(d), show_value(v)] for k, d, v in (diffs or [])]
    return outline, changed


def _slice_rows(slices: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    rows = []
    for tag_key, values in sorted((slices or {}).items(), key=lambda kv: str(kv[0])):
        for tag_value, mets in sorted((values or {}).items(), key=lambda kv: str(kv[0])):
            rows.append((str(tag_key), str(tag_value), mets or {}))
    return rows


def _markdown(run_dir: Path, m: Mapping[str, Any], cfg: Mapping[str, Any],
              plots: list[Path], name: str | None = None, diffs: list | None = None) -> str:
    overall = m.get("overall") or {}
    ds_cfg = cfg.get("dataset")
    ds = ds_cfg if isinstance(ds_cfg, Mapping) else {}
    title = run_title(run_dir, cfg, name)
    lines = [f"# raglab run report: {_md_escape(title)}", ""]
    outline, changed = config_rows(cfg, diffs)
    if outline or changed:
        lines += ["## Configuration", ""]
        if outline:
            lines += _table(["part", "choice"], outline) + [""]
        if changed:
            lines += ["Differences from the shipped defaults:", ""]
            lines += _table(["key", "default", "this run"], changed) + [""]
        elif diffs is not None:
            lines += ["The shipped defaults, unchanged.", ""]
    lines += [f"- dataset: {_md_escape(ds.get('name', 'n/a'))}",
              f"- cases scored: {fmt(m.get('n_cases'))}",
              f"- cases quarantined: {fmt(m.get('n_quarantined'))}",
              f"- cases with errors: {fmt(m.get('errors'))}",
              f"- self-graded: {self_graded_text(m)}"]
    if m.get("weighted"):
        lines.append(f"- weighted: every mean weighs the cases (effective sample size "
                     f"{m.get('n_eff', 0):.1f} of {fmt(m.get('n_cases'))})")
    if m.get("sequential"):
        lines.append(f"- {_md_escape(sequential_run.headline(m['sequential']))}")
    lines.append("")
    head = _headline_names(overall, cfg)
    lines += ["## Headline metrics", ""]
    lines += _table(["metric", "value", "better"],
                    [[n, fmt(overall.get(n)), arrow(n)] for n in head]) \
        if head else ["(no headline metric in this run)"]
    lines += [""]
    lines += _diagnosis_lines(m.get("diagnoses"))
    lines += conversations.markdown(m.get("conversations"), _table, _md_escape)
    lines += human_scale.markdown(m.get("ppi"), _table, _md_escape)
    lines += sequential_run.markdown(m.get("sequential"), _table, _md_escape)
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
    if fallback_rows(m):
        lines += [f"## {FALLBACK_TITLE}", ""]
        lines += _table(["counter", "meaning", "count"], fallback_rows(m)) + [""]
    rows = _slice_rows(m.get("slices") or {})
    cols = slice_columns(rows)
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


def plain_text(fn):
    """Draw with every label as plain text: a tag value such as ``$\\frac{1}{$`` is shown
    as written, never read as mathtext (which could fail the whole plot)."""
    import functools

    @functools.wraps(fn)
    def drawn(*args: Any, **kwargs: Any) -> Any:
        from matplotlib import rc_context

        with rc_context({"text.parse_math": False}):
            return fn(*args, **kwargs)

    return drawn


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: Path) -> None:
    """A plot, through the one safe write (drawn in memory, then written and renamed)."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    atomic_write_chunks(path, [buf.getvalue()])


def recall_axes(ax, cutoffs: set[int], xlabel: str, title: str, **legend: Any) -> None:
    """The evidence-recall@k axes every report draws: k on a log scale, ticks at the
    cutoffs measured, recall from 0 to 1."""
    ax.set_xscale("log")
    ax.set_xticks(sorted(cutoffs))
    ax.set_xticklabels([str(c) for c in sorted(cutoffs)])
    ax.minorticks_off()
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("evidence recall@k")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", **legend)


@plain_text
def plot_recall_at_k(overall: Mapping[str, Any], path: Path) -> bool:
    """evidence_recall@k vs k for both stages; False (nothing written) when no data."""
    series: dict[str, list[tuple[int, float]]] = {}
    for name, value in overall.items():
        match = RECALL_AT.match(str(name))
        v = num(value)
        if match and v is not None:
            series.setdefault(match.group(1), []).append((int(match.group(2)), v))
    if not series:
        return False
    fig = _figure(6, 4)
    ax = fig.add_subplot(1, 1, 1)
    cutoffs: set[int] = set()
    for stage in STAGES:
        points = sorted(series.get(stage, []))
        if points:
            xs, ys = zip(*points)
            cutoffs.update(xs)
            ax.plot(xs, ys, marker="o", label=f"{stage} (before reranking)"
                    if stage == "candidate" else "final (reached the generator)")
    recall_axes(ax, cutoffs, "cutoff k", "Evidence recall by cutoff")
    _save(fig, path)
    return True


NA_FACE = "#eeeeee"
NEUTRAL_FACE = "#dde6f0"


def slice_cell(metric: str, value: Any) -> dict[str, Any]:
    """How one heat-map cell is drawn: ``{"text", "face", "hatch", "ink", "good"}``.

    A value that does not apply is a grey hatched ``n/a`` cell. Any other value, 0
    included, is coloured by how good it is (``good``: the value, or 1 - value for a
    lower-is-better metric, for metrics bounded in [0, 1]; None otherwise, drawn neutral)."""
    v = num(value)
    if v is None:
        return {"text": "n/a", "face": NA_FACE, "hatch": "///", "ink": "#666666",
                "good": None}
    from matplotlib import colormaps

    spec = spec_of(metric)
    good = None
    if spec is not None and spec.kind in ("share", "binary") and \
            spec.direction in ("higher", "lower"):
        good = min(1.0, max(0.0, v if spec.direction == "higher" else 1 - v))
    face = colormaps["RdYlGn"](good) if good is not None else NEUTRAL_FACE
    dark = good is not None and (good < 0.15 or good > 0.85)
    return {"text": fmt(v), "face": face, "hatch": None, "ink": "white" if dark else "black",
            "good": good}


@plain_text
def plot_slices(slices: Mapping[str, Any], path: Path) -> bool:
    """A heat map of headline metrics by slice; False (nothing written) when no data.

    One row per slice (the largest 40 when there are more), one column per headline metric
    headed with its better direction (↑/↓). A cell's colour says how good its value is
    (green better, red worse, whatever the direction); its number is printed; a metric that
    does not apply to the slice is a grey hatched ``n/a`` cell, so 0 is never mistaken for
    it."""
    rows = _slice_rows(slices)
    cols = [c for c in slice_columns(rows)
            if any(num(mets.get(c)) is not None for _, _, mets in rows)]
    if not cols:
        return False
    rows = [r for r in rows if any(num(r[2].get(c)) is not None for c in cols)]
    capped = len(rows) > MAX_PLOTTED_SLICES
    if capped:  # keep the largest slices, in their sorted order
        keep = sorted(rows, key=lambda r: -(num(r[2].get("n")) or 0))[:MAX_PLOTTED_SLICES]
        rows = [r for r in rows if r in keep]
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    fig = _figure(2.8 + 0.78 * len(cols), 1.9 + 0.3 * len(rows))
    ax = fig.add_subplot(1, 1, 1)
    cells: dict[bool, tuple[list, list]] = {False: ([], []), True: ([], [])}  # by n/a
    for i, (_, _, mets) in enumerate(rows):
        for j, col in enumerate(cols):
            cell = slice_cell(col, mets.get(col))
            boxes, faces = cells[cell["hatch"] is not None]
            boxes.append(Rectangle((j, i), 1, 1))
            faces.append(cell["face"])
            ax.text(j + 0.5, i + 0.5, cell["text"], ha="center", va="center",
                    fontsize=7 if cell["hatch"] else 7.5, color=cell["ink"])
    # the cells as two collections (drawn at once, not one patch each): coloured cells with
    # white edges, and grey hatched n/a cells
    for na, (boxes, faces) in cells.items():
        if boxes:
            ax.add_collection(PatchCollection(
                boxes, facecolors=faces, edgecolors="#bbbbbb" if na else "white",
                linewidths=0.5 if na else 0.8, hatch="///" if na else None, zorder=1))
    ax.set_xlim(0, len(cols))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(cols))])
    ax.set_xticklabels([f"{c} {arrow(c)}".strip() for c in cols], rotation=35, ha="left",
                       rotation_mode="anchor", fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.5 for i in range(len(rows))])
    labels = []
    for k, v, mets in rows:
        n = num(mets.get("n"))
        labels.append(term(f"{k}={v}") + (f" (n={int(n)})" if n is not None else ""))
    ax.set_yticklabels(labels, fontsize=8)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    shown = f"the {MAX_PLOTTED_SLICES} largest slices" if capped else "every slice"
    ax.set_xlabel(f"Headline metrics by slice ({shown}). ↑ higher is better, ↓ lower is "
                  "better; green = better, red = worse; grey n/a = does not apply "
                  "(0 is a coloured cell)", fontsize=8, labelpad=8)
    _save(fig, path)
    return True


def write_run_report(run_dir: Path, name: str | None = None,
                     diffs: list | None = None, plots: bool = True,
                     config: dict | None = None) -> list[Path]:
    """Write report.md, report.html (+ recall_at_k.png, slices.png when they have data);
    return the paths. ``name``: the run's name (its title); ``diffs``: its configuration's
    differences from the shipped defaults, ``[(key, default, value)]``. ``plots=False``
    skips drawing (matplotlib is not imported) and the report says how to draw them later
    (``python -m raglab.report.run_report RUN_DIR``). ``config``: the configuration its
    config.yaml holds, when the caller has it (then the file is not read again)."""
    from raglab.report.report_html import write_report_html

    run_dir = Path(run_dir)
    metrics, cfg = _load(run_dir, config)
    draw = plots
    plots_drawn: list[Path] = []
    recall_png, slices_png = run_dir / "recall_at_k.png", run_dir / "slices.png"
    for path, plot, data in ((recall_png, plot_recall_at_k, metrics.get("overall")),
                             (slices_png, plot_slices, metrics.get("slices"))):
        if draw and plot(data or {}, path):
            plots_drawn.append(path)
        else:
            path.unlink(missing_ok=True)  # no stale plot from an earlier report
    report = run_dir / "report.md"
    text = _markdown(run_dir, metrics, cfg, plots_drawn, name, diffs)
    if not draw:
        text += ("\nPlots were not drawn for this run (a large run draws them on demand): "
                 f"`python -m raglab.report.run_report {run_dir}`\n")
    _write_atomic(report, text)
    html = write_report_html(run_dir, run_title(run_dir, cfg, name), metrics, cfg, diffs,
                             plots_drawn)
    return [report, html, *plots_drawn]


def rewrite_report_text(run_dir: Path, name: str | None = None,
                        diffs: list | None = None) -> list[Path]:
    """report.md and report.html written again around the plots already drawn, for a
    metrics.json whose figures the plots show did not change (``raglab label`` adds its
    ``ppi`` section)."""
    from raglab.report.report_html import write_report_html

    run_dir = Path(run_dir)
    metrics, cfg = _load(run_dir)
    plots = [p for p in (run_dir / "recall_at_k.png", run_dir / "slices.png") if p.is_file()]
    report = run_dir / "report.md"
    _write_atomic(report, _markdown(run_dir, metrics, cfg, plots, name, diffs))
    return [report, write_report_html(run_dir, run_title(run_dir, cfg, name), metrics, cfg,
                                      diffs, plots)]


def ensure_run_report(run_dir: Path) -> list[Path]:
    """The run's report files: the ones already written for its current metrics.json, or
    freshly written ones (so a tracked run does not draw its plots twice)."""
    run_dir = Path(run_dir)
    report, metrics = run_dir / "report.md", run_dir / "metrics.json"
    if report.is_file() and metrics.is_file() and \
            report.stat().st_mtime_ns >= metrics.stat().st_mtime_ns:
        return [report, *(p for p in (run_dir / "report.html", run_dir / "recall_at_k.png",
                                       run_dir / "slices.png") if p.is_file())]
    return write_run_report(run_dir)


def report_files(run_dir: Path) -> list[Path]:
    """The report files to log with a finished run (:func:`ensure_run_report`); none, with a
    warning, when drawing the report fails: a report bug must not lose the run."""
    try:
        return ensure_run_report(run_dir)
    except Exception as exc:  # noqa: BLE001
        import logging

        logging.getLogger(__name__).warning("run report not written: %s", exc)
        return []


if __name__ == "__main__":  # draw a run's report with its plots: python -m ... RUN_DIR
    import sys

    for p in write_run_report(Path(sys.argv[1])):
        print(p)
