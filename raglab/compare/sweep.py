"""Comparing every job of a sweep with one baseline job (``raglab compare SWEEP --baseline``),
and every pair of jobs in one sweep-wide family per headline metric (:mod:`.sweep_family`).

A sweep is a Hydra multirun directory (jobs in numbered subdirectories, the sweep's
parameters in ``multirun.yaml``) or an MLflow parent run (its children). Each job is named by
its swept parameters, ``chunker.size=128,k=3``, read from the job's own ``config.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raglab.compare.comparison import Comparison, compare_runs, passes
from raglab.compare.config import CompareCfg
from raglab.compare.load import MLFLOW_ID, RunSource, load_dir, load_mlflow, questions
from raglab.compare.naming import _lookup, _read_yaml, _text, differing_keys, name_of, swept_keys
from raglab.errors import UserError
from raglab.metrics.catalog import HEADLINE


@dataclass
class Job:
    name: str                  # "chunker.size=128,k=3"
    number: str                # the subdirectory (Hydra) or the MLflow run id
    params: dict[str, str]     # swept parameter -> value
    source: RunSource


@dataclass
class SweepComparison:
    ref: str
    params: list[str]
    baseline: Job
    jobs: list[Job]                                          # every job, baseline included
    comparisons: dict[str, Comparison] = field(default_factory=dict)   # by job name
    cells: dict[str, dict[str, dict]] = field(default_factory=dict)    # metric -> job -> cell
    always_failing: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    #: every pair of jobs per headline metric (raglab.compare.sweep_family.sweep_family)
    family: dict = field(default_factory=dict)
    paths: tuple | None = None  # as Comparison.paths

    def shown_ref(self) -> str:
        from raglab.compare.paths import shown

        return shown(self.ref, self.paths) or self.ref


def _name_jobs(sources: list[tuple[str, RunSource]], keys: list[str]) -> list[Job]:
    if not keys:
        keys = differing_keys([s.config for _, s in sources])
    jobs = []
    for number, src in sources:
        params = {k: _text(_lookup(src.config, k)) for k in keys}
        src.label = name_of(params)
        jobs.append(Job(src.label, number, params, src))
    return jobs


# ---- loading a sweep ------------------------------------------------------------------------
def load_sweep(ref: str, tracking_uri: str, notes: list[str] | None = None
               ) -> tuple[list[Job], list[str]]:
    """The jobs of a sweep (a directory of numbered jobs, or an MLflow parent run) and its
    swept parameters. A parent whose tags list its jobs loads exactly those: a child run
    the tags do not name (a job deleted and run again leaves its first run behind) is left
    out, and ``notes`` gets one line naming it."""
    path = Path(ref).expanduser()
    if path.is_dir():
        subdirs = sorted((p for p in path.iterdir() if p.is_dir() and p.name.isdigit()),
                         key=lambda p: int(p.name))
        subdirs = [p for p in subdirs if (p / "records.jsonl").is_file()]
        if not subdirs:
            raise UserError(f"not a sweep directory: no numbered job directory with "
                            f"records.jsonl in {ref}")
        keys = swept_keys(_read_yaml(path / "multirun.yaml"))
        sources = [(p.name, load_dir(str(p), p)) for p in subdirs]
    elif MLFLOW_ID.match(ref):
        from raglab.compare.load import _temp_dir
        from raglab.tracking.mlflow_store import child_runs, read_run

        parent = read_run(ref, tracking_uri, _temp_dir())
        children = child_runs(ref, tracking_uri)
        if not children:
            raise UserError(f"MLflow run {ref} has no child runs: not a sweep's parent run")
        order = {j["run_id"]: j["num"] for j in _tagged_jobs(ref, tracking_uri)}
        if order:  # job 0 first, as Hydra numbered them
            stale = [c["run_id"] for c in children if c["run_id"] not in order]
            if stale:
                children = [c for c in children if c["run_id"] in order]
                if notes is not None:
                    notes.append(f"{len(stale)} child run(s) of {ref} are not among the jobs "
                                 f"its tags list (superseded by a re-run of the job): left "
                                 f"out: {', '.join(stale[:5])}"
                                 + (", ..." if len(stale) > 5 else ""))
            children.sort(key=lambda c: order.get(c["run_id"], len(order)))
        sweep_dir = parent["tags"].get("raglab.sweep_dir")
        keys = swept_keys(_read_yaml(Path(sweep_dir) / "multirun.yaml")) if sweep_dir else []
        sources = [(c["run_id"], load_mlflow(c["run_id"], tracking_uri)) for c in children]
    else:
        raise UserError(f"no such sweep directory or MLflow run id: {ref}")
    jobs = _name_jobs(sources, keys)
    return jobs, list(jobs[0].params)


def _pairs(text: str) -> set[str]:
    parts: list[str] = []
    for piece in text.split(","):
        if "=" in piece or not parts:
            parts.append(piece.strip())
        else:
            parts[-1] += "," + piece
    return set(parts)


def find_job(jobs: list[Job], wanted: str) -> Job:
    """The job named ``wanted``: its number/run id, its name, or its parameters in any order."""
    for test in (lambda j: j.number == wanted, lambda j: j.name == wanted,
                 lambda j: _pairs(j.name) == _pairs(wanted)):
        found = [j for j in jobs if test(j)]
        if len(found) == 1:
            return found[0]
    names = ", ".join(f"{j.number}: {j.name}" for j in jobs[:12])
    raise UserError(f"--baseline {wanted!r} names no job of the sweep (jobs: {names})")


def _tagged_jobs(ref: str, tracking_uri: str) -> list[dict]:
    from raglab.tracking.results import sweep_jobs

    return sweep_jobs(ref, tracking_uri)


def resolve_baseline(ref: str, tracking_uri: str, wanted: str | None) -> str | None:
    """For an MLflow parent run whose tags list its jobs: the run id of the baseline job
    (``wanted``: a job number, a run id, or ``KEY=VALUE,...`` in any order; None: job 0),
    read from the parent's tags before any run is loaded; UserError when it names no job.
    None for a sweep directory or a parent without job tags (the loaded jobs decide)."""
    if Path(ref).expanduser().is_dir() or not MLFLOW_ID.match(ref):
        return None
    tagged = _tagged_jobs(ref, tracking_uri)
    if not tagged:
        return None
    if wanted is None:
        return tagged[0]["run_id"]
    for test in (lambda j: str(j["num"]) == wanted, lambda j: j["run_id"] == wanted,
                 lambda j: j["values"] == wanted,
                 lambda j: j["values"] is not None and _pairs(j["values"]) == _pairs(wanted)):
        found = [j for j in tagged if test(j)]
        if len(found) == 1:
            return found[0]["run_id"]
    names = ", ".join(f"{j['num']}: {j['values'] or j['run_id']}" for j in tagged[:12])
    raise UserError(f"--baseline {wanted!r} names no job of the sweep {ref} (jobs: {names})")


# ---- comparing ------------------------------------------------------------------------------
def compare_sweep(ref: str, jobs: list[Job], params: list[str], baseline: Job,
                  cfg: CompareCfg, **allow: bool) -> SweepComparison:
    from raglab.stats import adjust_pvalues

    sc = SweepComparison(ref, params, baseline, jobs)
    for job in jobs:
        if job is baseline:
            continue
        comp = compare_runs(baseline.source, job.source, cfg, **allow)
        sc.comparisons[job.name] = comp
        sc.warnings += [f"{job.name}: {w}" for w in comp.warnings]
    metrics = [m for m in HEADLINE if any(c.row(m) for c in sc.comparisons.values())]
    keys = []
    for m in metrics:
        sc.cells[m] = {}
        for name, comp in sc.comparisons.items():
            r = comp.row(m)
            if r is None:
                continue
            cell = {k: r[k] for k in ("baseline", "candidate", "delta", "ci_low", "ci_high",
                                      "p_value", "n", "comparable")}
            cell.update(p_adjusted=None, significant=False,
                        direction=comp.metrics[m]["direction"])
            sc.cells[m][name] = cell
            if r["comparable"] and r["p_value"] is not None:
                keys.append((m, name))
    adjusted = adjust_pvalues([sc.cells[m][n]["p_value"] for m, n in keys], cfg.adjust)
    for (m, n), p in zip(keys, adjusted):
        sc.cells[m][n]["p_adjusted"] = p
        sc.cells[m][n]["significant"] = p is not None and p < cfg.alpha
    sc.always_failing = always_failing(jobs, cfg)
    from raglab.compare.sweep_family import family_warnings, sweep_family

    directions = {m: next(iter(sc.cells[m].values()))["direction"]
                  for m in metrics if sc.cells[m]}
    sc.family = sweep_family(jobs, directions, cfg.alpha, cfg.family_permutations, cfg.seed)
    sc.warnings += family_warnings(sc.family, jobs)
    sc.settings = {"alpha": cfg.alpha, "adjust": cfg.adjust, "confidence": cfg.confidence,
                   "interval": cfg.interval,
                   "family_size": len(keys), "n_bootstrap": cfg.n_bootstrap, "seed": cfg.seed,
                   "family_permutations": cfg.family_permutations}
    said = sorted({str(c.settings["clustering"]) for c in sc.comparisons.values()
                   if c.settings.get("clustering")})
    if said:  # conversations (clustered by default) or compare.cluster
        sc.settings["clustering"] = said[0] if len(said) == 1 else said
    return sc


def always_failing(jobs: list[Job], cfg: CompareCfg) -> list[dict]:
    """Cases that fail a flip metric under every job where it applies (and it applies in
    each): no configuration of the sweep passes them."""
    ids = [cid for cid in jobs[0].source.by_id() if all(cid in j.source.by_id() for j in jobs)]
    out: list[dict[str, Any]] = []
    for cid in ids:
        failed = []
        for metric, t in cfg.flip_thresholds.items():
            assert t is not None  # CompareCfg's validator drops null thresholds
            vals = [j.source.by_id()[cid]["metrics"].get(metric) for j in jobs]
            if all(v is not None for v in vals) and not any(passes(metric, v, t) for v in vals):
                failed.append(metric)
        if failed:
            out.append({"case_id": cid, "metrics": failed})
    qs = questions(jobs[0].source, {x["case_id"] for x in out})
    for x in out:
        x["question"] = qs.get(x["case_id"])
    return out


def sweep_json(sc: SweepComparison) -> dict:
    from raglab.compare.paths import shown

    return {
        "sweep": sc.shown_ref(), "params": sc.params, "baseline": sc.baseline.name,
        "jobs": [{"name": j.name, "number": j.number, "params": j.params,
                  "run_dir": shown(str(j.source.run_dir), sc.paths)
                  if j.source.mlflow_run_id is None else None,
                  "mlflow_run_id": j.source.mlflow_run_id} for j in sc.jobs],
        "settings": sc.settings, "warnings": sc.warnings, "tables": sc.cells,
        "always_failing": sc.always_failing, "family": sc.family,
        "comparisons": {n: {"rows": c.rows, "versions": c.versions, "warnings": c.warnings}
                        for n, c in sc.comparisons.items()},
    }


def write_sweep_files(sc: SweepComparison, out: Path) -> list[Path]:
    """Write the comparison's ``compare.md``, ``compare.html`` (the heat maps) and
    ``compare.json`` into ``out``, each under a temporary name renamed into place."""
    from raglab.compare.sweep_render import render_sweep_html, render_sweep_md
    from raglab.data.io import atomic_write_text, json_text

    files = {"compare.md": render_sweep_md(sc), "compare.html": render_sweep_html(sc),
             "compare.json": json_text(sweep_json(sc), indent=1)}
    for name, text in files.items():  # the JSON comes from json_text, scrubbed already
        atomic_write_text(out / name, text, scrubbed=name.endswith(".json"))
    return [out / name for name in files]


def sweep_out_dir(ref: str, baseline: Job) -> Path:
    """Where a sweep comparison's files go by default: ``SWEEP/compare-vs-JOB/`` for a sweep
    directory, ``compare-sweep-PARENT-vs-JOB/`` in the working directory for a parent run."""
    from raglab.compare.load import safe_name

    sweep_dir = Path(ref)
    if sweep_dir.is_dir():
        return (sweep_dir / f"compare-vs-{safe_name(baseline.name)}").resolve()
    return (Path.cwd() / f"compare-sweep-{ref[:8]}-vs-{safe_name(baseline.name)}").resolve()


def job_numbers(sc: SweepComparison, tracking_uri: str) -> dict[str, str]:
    """Each job's number in its sweep, by job name: the parent's job tags for an MLflow
    parent (the run's place in job order when it has none), the subdirectory otherwise."""
    numbers = {j.name: j.number for j in sc.jobs}
    if sc.jobs and sc.jobs[0].source.mlflow_run_id is not None:
        tagged = {t["run_id"]: str(t["num"]) for t in _tagged_jobs(sc.ref, tracking_uri)}
        numbers = {j.name: tagged.get(j.number, str(i)) for i, j in enumerate(sc.jobs)}
    return numbers


def log_to_parent(sc: SweepComparison, parent_id: str, tracking_uri: str,
                  files: list[Path]) -> int:
    """Each job's headline deltas and intervals against the baseline job, as metrics of
    the sweep's MLflow parent run (``sweep.<job number>.<metric>.delta``, ...), the
    sweep-wide family's p-values and best groups (``family.<a>.<b>.<metric>.p_adjusted``,
    ``family.<job>.<metric>.best_group``), and the comparison's files (the heat map in
    compare.html) as its artifacts; the number of new or changed ``sweep.*`` figures."""
    from raglab.tracking.results import log_sweep_comparison, log_sweep_family

    numbers = job_numbers(sc, tracking_uri)
    cells = {m: {numbers[name]: cell for name, cell in by_job.items()}
             for m, by_job in sc.cells.items()}
    n = log_sweep_comparison(parent_id, tracking_uri, numbers[sc.baseline.name], cells,
                             files)
    log_sweep_family(parent_id, tracking_uri, numbers, sc.family)
    return n
