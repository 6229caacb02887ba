"""What a run and a sweep lead with: headline figures, config differences, job tables.

Pure functions of metrics.json objects and configuration dicts; the headline set and the
direction in which each metric is better come from :mod:`raglab.metrics.catalog`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from raglab.metrics.catalog import HEADLINE, spec_of
from raglab.report.format import fmt, num
from raglab.secrets import scrub
from raglab.text.escape import md, md_code

#: configuration keys that say how a run is recorded or scheduled, not what it measures
_BOOKKEEPING = ("hydra", "run_name", "progress", "concurrency", "cache_dir", "tracking")


def arrow(metric: str) -> str:
    """``↑`` higher is better, ``↓`` lower is better, ``""`` neither or unknown."""
    spec = spec_of(metric)
    return {"higher": "↑", "lower": "↓"}.get(spec.direction, "") if spec else ""


def better_words(metric: str) -> str:
    spec = spec_of(metric)
    return {"higher": "higher is better", "lower": "lower is better"}.get(
        spec.direction, "") if spec else ""


def headline_names(overall: Mapping[str, Any]) -> list[str]:
    """The catalog's headline metrics this run reports, in display order."""
    return [n for n in HEADLINE if n in overall]


def report_headline(overall: Mapping[str, Any], k: Any) -> list[str]:
    """The headline of a report: the catalog's, with its final-stage ``@k`` metrics (recall,
    nDCG) at the run's ``k`` after the first of them."""
    names = headline_names(overall)
    if isinstance(k, int) and not isinstance(k, bool):
        at_k = [n for n in HEADLINE
                if n.startswith("final.") and (s := spec_of(n)) is not None and s.at_k]
        extra = [f"{n}@{k}" for n in at_k if f"{n}@{k}" in overall]
        at = names.index(at_k[0]) + 1 if at_k and at_k[0] in names else 0
        names[at:at] = extra
    return names


def self_graded_text(metrics: Mapping[str, Any]) -> str:
    """Whether the run's judge graded its own model's answers (``metrics.json``
    ``self_graded``), in words for the reports."""
    value = metrics.get("self_graded")
    if value is None:
        return "not recorded"
    if value:
        return ("yes: the grader's model is the system's model (a judge tends to favour "
                "its own outputs; grade with another model)")
    return "no"


def flatten(cfg: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(cfg, Mapping):
        for k, v in cfg.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, Mapping) and v:
                out.update(flatten(v, key))
            else:
                out[key] = v
    return out


#: the judge's structured-output fallbacks of ``model_usage`` (raglab.llm.client
#: FALLBACK_FIELDS) and what each counts, as the report shows them
FALLBACK_ROWS = (
    ("format_re_asks", "unusable answers asked again"),
    ("single_item_calls", "items asked alone after their batch's answers were unusable"),
    ("unreadable_items", "items still unreadable alone (their case's metric is an error)"),
    ("schema_unsupported", "models whose server refused response_format json_schema"),
)
FALLBACK_TITLE = "Judge output fallbacks"


def fallback_rows(metrics: Mapping[str, Any]) -> list[list[str]]:
    """``[counter, meaning, count]`` of a run's judge fallbacks; none without model calls."""
    usage = metrics.get("model_usage") or {}
    if not isinstance(usage, Mapping) or "requests" not in usage:
        return []
    return [[k, what, fmt(usage.get(k, 0))] for k, what in FALLBACK_ROWS]


def config_diff(defaults: Mapping[str, Any] | None, cfg: Mapping[str, Any]
                ) -> list[tuple[str, Any, Any]]:
    """``[(key, default, value)]`` where the run's config differs from the shipped one."""
    if not defaults:
        return []
    a, b = flatten(defaults), flatten(cfg)
    rows = []
    for key in sorted(set(a) | set(b)):
        if key.split(".")[0] in _BOOKKEEPING:
            continue
        if a.get(key, _ABSENT) != b.get(key, _ABSENT):
            rows.append((key, a.get(key, _ABSENT), b.get(key, _ABSENT)))
    return rows


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


_ABSENT = _Absent()


def show_value(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = scrub(str(value))  # scrubbed, then cut
    return text if len(text) <= 80 else text[:79] + "…"


def config_outline(cfg: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The choices a reader wants first: dataset, system, chunker, embedder, reranker, k,
    generator, grader (each group by its chosen ``name`` and main fields)."""
    rows: list[tuple[str, str]] = []
    for group in ("dataset", "system", "chunker", "embedder", "reranker", "prompt",
                  "generator", "grader"):
        sec = cfg.get(group)
        if not isinstance(sec, Mapping):
            continue
        fields = [f"{k}={show_value(v)}" for k, v in sec.items()
                  if k != "name" and not isinstance(v, (Mapping, list)) and
                  not (isinstance(v, str) and (len(v) > 40 or "\n" in v))]
        rows.append((group, " ".join([str(sec.get("name", "")), *fields[:4]]).strip()))
    for key in ("k", "candidate_depth", "context_token_budget"):
        if key in cfg:
            rows.append((key, show_value(cfg[key])))
    return rows


def _md(text: Any) -> str:
    return md(text)


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(_md(h) for h in header) + " |",
           "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return out


def run_description(name: str, metrics: Mapping[str, Any], cfg: Mapping[str, Any],
                    diffs: Sequence[tuple[str, Any, Any]], report_link: str | None) -> str:
    """The markdown shown at the top of a run's MLflow page."""
    overall = metrics.get("overall") or {}
    ds_cfg = cfg.get("dataset")
    ds = ds_cfg if isinstance(ds_cfg, Mapping) else {}
    lines = [f"**{_md(name)}**: dataset {_md(ds.get('name', 'n/a'))}, "
             f"{fmt(metrics.get('n_cases'))} cases, {fmt(metrics.get('n_quarantined'))} "
             f"quarantined, {fmt(metrics.get('errors'))} with errors", ""]
    head = headline_names(overall)
    shown = [n for n in head if num(overall.get(n)) is not None]
    if shown:  # first, inline: the page shows only the description's first lines
        lines += [" · ".join(f"{n} **{fmt(overall.get(n))}** {arrow(n)}".strip()
                             for n in shown), ""]
    if head:
        lines += md_table(["headline metric", "value", "better"],
                          [[n, fmt(overall.get(n)), arrow(n)] for n in head]) + [""]
    if diffs:
        lines += ["**Config differences from the defaults:** " + "; ".join(
            f"`{md_code(k)}` {_md(show_value(d))} → {_md(show_value(v))}"
            for k, d, v in diffs[:30])
            + (f"; and {len(diffs) - 30} more" if len(diffs) > 30 else ""), ""]
    else:
        lines += ["**Config:** the shipped defaults", ""]
    versions = metrics.get("metric_versions") or {}
    if versions:
        lines += ["**Metric versions:** " + ", ".join(
            f"{f} {v}" for f, v in sorted(versions.items())), ""]
    if report_link:
        lines += [f"**Report:** [report.html]({report_link}) (artifact `report/report.html`)"]
    return "\n".join(lines).strip() + "\n"


# ---- sweeps ------------------------------------------------------------------------------
def sweep_columns(jobs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Headline metrics with a value in at least one job."""
    return [n for n in HEADLINE
            if any(num((j.get("overall") or {}).get(n)) is not None for j in jobs)]


def job_line(num_: int, total: int | str, label: str, overall: Mapping[str, Any]) -> str:
    """One line per finished job: its swept values and its headline figures."""
    figs = " ".join(f"{n}={fmt(overall.get(n))}" for n in HEADLINE
                    if num(overall.get(n)) is not None)
    return f"job {num_}/{total} {label}: {figs}"


def sweep_text(header: Sequence[str], rows: Sequence[Sequence[str]], n_keys: int,
               max_columns: int = 10) -> str:
    """The job table for a terminal: with a few jobs, one column per job (swept values on
    top, then one row per headline metric) so it stays narrow; with many, one row per job."""
    if len(rows) > max_columns:
        return text_table(header, rows)
    t_header = ["job", *(r[0] for r in rows)]
    t_rows = [[header[i], *(r[i] for r in rows)] for i in range(1, len(header))]
    table = text_table(t_header, t_rows)
    lines = table.splitlines()
    if n_keys:  # a rule between the swept values and the metrics
        lines.insert(2 + n_keys, lines[1])
    return "\n".join(lines)


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(header)]
    fmt_row = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w)  # noqa: E731
                                 for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([fmt_row(header), fmt_row(["-" * w for w in widths]),
                      *(fmt_row(r) for r in rows)])


def sweep_rows(jobs: Sequence[Mapping[str, Any]], keys: Sequence[str],
               labels: Mapping[str, str] | None = None) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the job table: ``#``, each swept key, each headline metric.

    ``jobs``: ``{"num", "values": {key: shown value}, "overall": {...} or None,
    "status"}``; a job without metrics shows its status in the metric columns."""
    cols = sweep_columns(jobs)
    labels = labels or {}
    header = ["#", *(labels.get(k, k) for k in keys), *(f"{c} {arrow(c)}".strip() for c in cols)]
    rows = []
    for j in jobs:
        overall = j.get("overall")
        vals = [str((j.get("values") or {}).get(k, "")) for k in keys]
        if overall is not None:
            figs = [fmt(overall.get(c)) for c in cols]
        elif cols:
            figs = [str(j.get("status", "not run"))] + [""] * (len(cols) - 1)
        else:
            figs = []
        rows.append([str(j["num"]), *vals, *figs])
    return header, rows


def best_job_line(jobs: Sequence[Mapping[str, Any]], keys: Sequence[str],
                  labels: Mapping[str, str] | None = None) -> str | None:
    """``best final.evidence_recall ↑: job 3 (size=128 k=5), 0.9041`` for the first
    headline metric (catalog order) whose value differs between jobs; None if none does."""
    labels = labels or {}
    for col in sweep_columns(jobs):
        spec = spec_of(col)
        given = [(num((j.get("overall") or {}).get(col)), j) for j in jobs]
        vals = [(v, j) for v, j in given if v is not None]
        if not spec or spec.direction not in ("higher", "lower") or \
                len({v for v, _ in vals}) < 2:
            continue
        v, j = (max if spec.direction == "higher" else min)(vals, key=lambda t: t[0])
        setting = " ".join(f"{labels.get(k, k)}={(j.get('values') or {}).get(k, '')}"
                           for k in keys)
        return f"best {col} {arrow(col)}: job {j['num']} ({setting}), {fmt(v)}"
    return None


def sweep_markdown(title: str, jobs: Sequence[Mapping[str, Any]], keys: Sequence[str],
                   sweep_dir: str, labels: Mapping[str, str] | None = None,
                   limit: int = 8000, best: str | None = None) -> str:
    """The parent run's description: the "best" line (``best``, the line the terminal
    printed; :func:`best_job_line` when not given) and the job table (rows cut to fit
    ``limit`` characters, MLflow's tag size; the whole table is the ``sweep.html``
    artifact)."""
    header, rows = sweep_rows(jobs, keys, labels)
    if len(rows) <= 10:  # one column per job, one row per swept key and metric: narrow
        header, rows = (["job", *(r[0] for r in rows)],
                        [[header[i], *(r[i] for r in rows)] for i in range(1, len(header))])
    head = [f"**{_md(title)}**: {len(jobs)} jobs in `{md_code(sweep_dir)}`; ↑ higher is better, "
            "↓ lower is better", ""]
    best = best or best_job_line(jobs, keys, labels)
    if best:
        head[1:1] = ["", _md(best)]
    tail = ["", "The whole table is the artifact `sweep.html`; each job is a child run."]
    for n in range(len(rows), -1, -1):
        more = ["", f"({len(rows) - n} more jobs in `sweep.html`)"] if n < len(rows) else []
        text = "\n".join(head + md_table(header, rows[:n]) + more + tail) + "\n"
        if len(text) <= limit:
            return text
    return "\n".join(head + tail) + "\n"
