"""The end of a sweep: one table of every job (swept values x headline metrics), the parent
run filled in, and where to look.

:class:`SweepSummary` is a Hydra callback (``hydra.callbacks`` in ``conf/config.yaml``).
Hydra calls ``on_multirun_end`` in the process that started the sweep once the launcher has
returned, whether the jobs ran in that process (basic launcher) or in others (joblib, Ray),
so the table is read back from each job's ``metrics.json`` in the sweep directory.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

#: job directories of the last sweep whose error rate exceeded their ``max_error_rate``, read
#: back from each job's metrics.json and config.yaml at the end of the sweep, so the jobs
#: of any launcher count (``raglab run -m`` then exits 1)
OVER_ERROR_RATE: list[Path] = []


class SweepSummary:
    """A Hydra callback (Hydra calls each ``on_*`` hook by name): a sweep's multirun.yaml
    is rewritten without secrets as its first job starts, and the end of a sweep prints
    the table."""

    _scrubbed = False

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        pass

    def on_run_end(self, config: Any, **kwargs: Any) -> None:
        pass

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        pass

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        # Hydra saved multirun.yaml before the first job, and a job's .hydra/ files (when
        # hydra.output_subdir is set) before it starts: hide their secrets now, so a sweep
        # stopped half way leaves none (multirun.yaml again at the end)
        _scrub_hydra_files(first=not self._scrubbed)
        self._scrubbed = True

    def on_job_end(self, config: Any, job_return: Any = None, **kwargs: Any) -> None:
        pass

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        from raglab.runner.naming import job_overrides, sweeper_params

        _scrub_config_file(Path(str(config.hydra.sweep.dir)) / "multirun.yaml")
        n_jobs = len(job_overrides([str(o) for o in config.hydra.overrides.task], True,
                                   sweeper_params(config.hydra.get("sweeper"))))
        OVER_ERROR_RATE[:] = over_error_rate(Path(str(config.hydra.sweep.dir)).resolve(),
                                             n_jobs)
        try:
            print(summarize(config), flush=True)
        except Exception as exc:  # noqa: BLE001 - the jobs are done; say why no table
            print(f"raglab: sweep summary not written: {type(exc).__name__}: {exc}",
                  file=sys.stderr)


def _scrub_hydra_files(first: bool) -> None:
    """The files Hydra wrote for this job (``.hydra/config.yaml``, ``hydra.yaml``,
    ``overrides.yaml`` when ``hydra.output_subdir`` is set) and, for the ``first`` job of a
    sweep, the sweep's ``multirun.yaml``, rewritten without secrets."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    try:
        hc = HydraConfig.get()
    except ValueError:
        return
    if hc.output_subdir is not None:
        folder = Path(str(hc.runtime.output_dir)) / str(hc.output_subdir)
        for name in ("config.yaml", "hydra.yaml", "overrides.yaml"):
            _scrub_config_file(folder / name)
    if first and hc.mode == RunMode.MULTIRUN:
        _scrub_config_file(Path(str(hc.sweep.dir)) / "multirun.yaml")


def _scrub_config_file(path: Path) -> None:
    """Rewrite a YAML file Hydra wrote (it holds the whole configuration, or the command
    line's overrides, header values included) with its secrets hidden: redacted by
    position, then every known secret (those of its overrides too) scrubbed by value,
    string by string, so keys and the overrides' structure stay readable (compare names a
    sweep's jobs from multirun.yaml). A file absent or unreadable is left alone."""
    from omegaconf import OmegaConf

    from raglab.data.io import atomic_write_text
    from raglab.secrets import SCRUBBER, override_secrets, redact, register, secret_values

    try:
        node = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except Exception:  # noqa: BLE001 - absent or unreadable (another launcher's layout)
        return
    if isinstance(node, dict):
        tasks = ((node.get("hydra") or {}).get("overrides") or {}).get("task") or []
    elif isinstance(node, list):  # overrides.yaml
        tasks = node
    else:
        return
    register(override_secrets([str(o) for o in tasks]))
    register(secret_values(node, node))
    clean = SCRUBBER.scrub_obj(redact(node))
    if clean != node:
        atomic_write_text(path, OmegaConf.to_yaml(OmegaConf.create(clean)), scrubbed=True)


def over_error_rate(sweep_dir: Path, n_jobs: int) -> list[Path]:
    """The finished jobs ``0 .. n_jobs - 1`` of a sweep (not the folders an earlier, larger
    sweep left in the same directory) whose error rate is above their ``max_error_rate``."""
    from raglab.data.io import read_run_config, read_run_metrics
    from raglab.errors import UserError
    from raglab.runner.summary import error_rate_exceeded

    over = []
    for run_dir in (sweep_dir / str(num) for num in range(n_jobs)):
        try:
            metrics, cfg = read_run_metrics(run_dir), read_run_config(run_dir)
        except UserError:
            continue  # not finished: the job said why when it stopped
        limit = cfg.get("max_error_rate")
        if isinstance(limit, int | float) and error_rate_exceeded(metrics, float(limit)):
            over.append(run_dir)
    return over


def _job_values(run_dir: Path, keys: list[str], overrides: list[str],
                groups: set[str]) -> dict[str, str]:
    from raglab.data.io import read_run_config
    from raglab.errors import UserError
    from raglab.runner.naming import name_parts, override_key

    try:
        cfg = read_run_config(run_dir)
    except UserError:
        cfg = {}
    # a config group's choice (never a secret) is read from the job's override itself
    choices = {override_key(o): o.split("=", 1)[1] for o in overrides
               if "=" in o and override_key(o) in groups}
    return dict(name_parts(cfg, keys, choices, swept=keys))


def jobs_of(sweep_dir: Path, overrides: list[str], groups: set[str],
            params: dict[str, str] | None = None) -> tuple[list[str], list[dict]]:
    """``(swept keys, jobs)`` of a finished sweep, each job with its values and metrics
    (``groups``: the config groups, whose swept value is a choice; ``params``: the sweep's
    ``hydra.sweeper.params``)."""
    from raglab.data.io import read_run_metrics
    from raglab.errors import UserError
    from raglab.runner.naming import job_overrides, swept_keys

    keys = swept_keys(overrides, params)
    jobs = []
    for num, job in enumerate(job_overrides(overrides, True, params)):
        run_dir = sweep_dir / str(num)
        try:
            metrics = read_run_metrics(run_dir)
        except UserError:
            metrics = None
        seq = (metrics or {}).get("sequential")
        jobs.append({"num": num, "dir": run_dir, "values": _job_values(run_dir, keys, job, groups),
                     "overall": (metrics or {}).get("overall") if metrics else None,
                     "status": "done" if metrics else "not finished",
                     "sequential": seq if isinstance(seq, dict) else None})
    return keys, jobs


#: the level of the best job's test against the runner-up (one two-sided paired test)
BEST_ALPHA = 0.05


def _case_values(run_dir: Path, metric: str,
                 conversations: dict[str, str] | None = None) -> dict[str, float]:
    """``{case_id: value}`` of one metric in a job's records.jsonl (a torn line skipped);
    ``conversations`` (when given) gets each turn's conversation (its ``conversation`` tag)."""
    import json

    from raglab.report.format import num

    out: dict[str, float] = {}
    try:
        lines = (Path(run_dir) / "records.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            rec = json.loads(line)
            value = num((rec.get("metrics") or {}).get(metric))
            conv = (rec.get("tags") or {}).get("conversation")
        except (ValueError, AttributeError):
            continue
        if value is not None:
            out[str(rec.get("case_id"))] = value
            if conversations is not None and isinstance(conv, str):
                conversations[str(rec.get("case_id"))] = conv
    return out


def sequential_note(jobs: list[dict]) -> str | None:
    """A line under the job table when jobs are sequential runs (``sequential.against``):
    each ran the cases its checks needed, so the table's means are of different cases."""
    seq = [j for j in jobs if j.get("sequential")]
    if not any(j["sequential"].get("cases_run") != j["sequential"].get("cases_total")
               for j in seq):
        return None  # (every job ran every case: the same cases)
    ran = ", ".join(f"job {j['num']} {j['sequential'].get('cases_run')} of "
                    f"{j['sequential'].get('cases_total')}" for j in seq)
    return (f"sequential runs ({ran} cases): each figure is the mean of the cases its job "
            "ran, so the table compares different cases; the line below tests on the cases "
            "both ran; decide each job on its confidence sequences with raglab decide "
            "BASELINE JOB_DIR")


def ranking_metric(jobs: list[dict]) -> str | None:
    """The metric the sweep's jobs are ranked by: the first headline metric (catalog order)
    with a better direction whose value differs between jobs (as ``best_job_line``)."""
    from raglab.metrics.catalog import spec_of
    from raglab.report.format import num
    from raglab.report.summary import sweep_columns

    for col in sweep_columns(jobs):
        spec = spec_of(col)
        vals = {num((j.get("overall") or {}).get(col)) for j in jobs} - {None}
        if spec and spec.direction in ("higher", "lower") and len(vals) >= 2:
            return col
    return None


def versus_runner_up(jobs: list[dict], keys: list[str], labels: dict[str, str]) -> str:
    """What follows the "best" line: whether the best job (by the first headline metric
    that differs, as ``best_job_line`` chooses) is significantly better than the runner-up
    by a paired test on the cases both ran (``raglab.stats``), or is not. A conversation's
    turns (the ``conversation`` tag) are one cluster, as ``raglab compare`` takes them, and
    the line says so."""
    import numpy as np

    from raglab.metrics.catalog import spec_of
    from raglab.report.format import fmt, num
    from raglab.stats import paired_table

    col = ranking_metric(jobs)
    spec = spec_of(col) if col else None
    if col and spec:
        vals = [(v, j) for v, j in ((num((j.get("overall") or {}).get(col)), j) for j in jobs)
                if v is not None]
        ranked = sorted(vals, key=lambda t: t[0], reverse=spec.direction == "higher")
        (_, best), (second_value, second) = ranked[0], ranked[1]
        setting = " ".join(f"{labels.get(k, k)}={(second.get('values') or {}).get(k, '')}"
                           for k in keys)
        who = f"the runner-up, job {second['num']} ({setting}), {fmt(second_value)}"
        convs: dict[str, str] = {}  # a conversation's turns are tested together, as compare
        b, c = _case_values(second["dir"], col), _case_values(best["dir"], col, convs)
        ids = [i for i in c if i in b]
        if not ids:
            return f"; not tested against {who} (no case with {col} in both)"
        clusters = None
        if any(i in convs for i in ids):
            clusters = np.asarray([f"v:{convs[i]}" if i in convs else f"case:{i}"
                                   for i in ids])
        stat = paired_table(np.array([[b[i]] for i in ids]), np.array([[c[i]] for i in ids]),
                            [spec.kind], [spec.direction], clusters=clusters)[0]
        better = (stat.p_value is not None and stat.p_value < BEST_ALPHA
                  and stat.delta is not None
                  and (stat.delta > 0) == (spec.direction == "higher") and stat.delta != 0)
        sign = "" if stat.delta is None or stat.delta < 0 else "+"
        detail = (f"{sign}{fmt(stat.delta)} [{fmt(stat.ci_low)}, {fmt(stat.ci_high)}], "
                  f"p={fmt(stat.p_value)} ({stat.test}, n={stat.n}")
        if clusters is not None:
            detail += f", clustered by conversation ({len({convs[i] for i in ids if i in convs})}" \
                " conversations)"
        detail += ")"
        return (f"; {'significantly' if better else 'not significantly'} better than {who} "
                f"(paired, alpha {BEST_ALPHA}): {detail}")
    return ""


def _tracks(name: str) -> bool:
    """Whether the sweep's tracking choice logs to a store (its class says so)."""
    from raglab import registry
    from raglab.errors import ConfigError

    try:
        return bool(registry.entry("tracking", name).factory.tracks)
    except ConfigError:
        return False


#: the environment variable ``raglab run -m`` hands its jobs and its end the sweep in
#: (JSON: ``keys``, the swept keys; ``jobs``, how many; ``name``, the sweep's own name)
SWEEP_ENV = "RAGLAB_SWEEP"


def sweep_context() -> dict:
    """What ``raglab run -m`` said of the sweep (``{}`` when it said nothing)."""
    import json
    import os

    try:
        ctx = json.loads(os.environ.get(SWEEP_ENV) or "{}")
    except ValueError:
        return {}
    return ctx if isinstance(ctx, dict) else {}


def summarize(config: Any) -> str:
    from raglab.data.io import atomic_write_text
    from raglab.metrics.catalog import spec_of
    from raglab.report.report_html import sweep_html
    from raglab.report.summary import (
        best_job_line,
        sweep_columns,
        sweep_markdown,
        sweep_rows,
        sweep_text,
    )
    from raglab.runner.naming import short_labels, sweep_name, sweeper_params

    sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
    overrides = [str(o) for o in config.hydra.overrides.task]
    groups = {str(g) for g in (config.hydra.runtime.get("choices") or {})}
    declared = sweeper_params(config.hydra.get("sweeper"))
    keys, jobs = jobs_of(sweep_dir, overrides, groups, declared)
    labels = short_labels(keys)
    header, rows = sweep_rows(jobs, keys, labels)
    name = str(config.get("run_name") or sweep_context().get("name") or sweep_name(keys))
    html = sweep_dir / "sweep.html"
    atomic_write_text(html, sweep_html(name, header, rows, len(keys), str(sweep_dir)))
    lines = [f"sweep {name!r}: {len(jobs)} jobs in {sweep_dir}",
             sweep_text(header, rows, len(keys))]
    note = sequential_note(jobs)
    if note:
        lines.append(note)
    best = best_job_line(jobs, keys, labels)
    if best:
        best += versus_runner_up(jobs, keys, labels)
        lines.append(best)
    tracking = config.get("tracking") or {}
    if _tracks(str(tracking.get("name"))):
        from raglab.tracking.mlflow_store import ui_command
        from raglab.tracking.mlflow_ui import summarize_sweep

        params = {k: ", ".join(dict.fromkeys(str(j["values"].get(k, "")) for j in jobs))
                  for k in keys}
        description = sweep_markdown(name, jobs, keys, str(sweep_dir), labels, best=best)
        found = summarize_sweep(str(tracking.get("uri")), str(tracking.get("experiment")),
                                sweep_dir, name, params, description, html,
                                {j["num"]: j["dir"] for j in jobs}, keys,
                                sweep_columns(jobs))
        if found:
            from raglab.tracking.results import open_on_jobs, set_job_values

            parent, exp_id, url = found
            columns = sweep_columns(jobs)
            ranking = ranking_metric(jobs) or (columns[0] if columns else None)
            spec = spec_of(ranking) if ranking else None
            url = open_on_jobs(str(tracking.get("uri")), exp_id, url, ranking,
                               spec is None or spec.direction != "lower")
            # each job's swept values beside its run id: --baseline resolves on these
            set_job_values(str(tracking.get("uri")), parent,
                           {j["num"]: ",".join(f"{k}={v}" for k, v in j["values"].items())
                            for j in jobs})
            lines += [f"MLflow parent run {parent} {name!r} (experiment "
                      f"{tracking.get('experiment')!r}); view the sweep with:",
                      f"  {ui_command(str(tracking.get('uri')))}", f"  then open {url}"]
            from raglab.runner.sweep_compare import compare_at_end

            # every job against job 0 on the parent, as raglab compare PARENT --baseline 0
            lines.append(compare_at_end(sweep_dir, len(jobs), parent,
                                        str(tracking.get("uri")), config))
    return "\n".join(lines)
