"""The end of a tracked sweep: every job compared with job 0, as ``raglab compare SWEEP
--baseline 0`` compares them (:func:`raglab.compare.sweep.compare_sweep`), the files
written into the sweep directory (``compare-vs-JOB/``) and each job's headline deltas and
intervals, with the heat map, logged to the sweep's MLflow parent run
(:func:`raglab.compare.sweep.log_to_parent`).

A comparison that cannot be made (one job, a job that did not finish, metric versions or
case sets that differ) never fails the sweep: the line returned says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raglab.secrets import clip_line


def compare_settings(config: Any):
    """The compare settings of this installation: ``compare/default.yaml`` of the config
    folder the sweep was composed from (as ``raglab compare`` reads it)."""
    from raglab.compare.config import CompareCfg
    from raglab.data.yaml_io import load_yaml_file

    data: dict = {}
    for src in config.hydra.runtime.get("config_sources") or []:
        if src.get("provider") == "main" and src.get("schema") == "file":
            path = Path(str(src.get("path"))) / "compare" / "default.yaml"
            data = (load_yaml_file(path) if path.is_file() else None) or {}
            break
    return CompareCfg.model_validate(data)


def compare_at_end(sweep_dir: Path, n_jobs: int, parent_id: str, uri: str, config: Any) -> str:
    """Compare jobs ``1 .. n_jobs - 1`` of the sweep with job 0, write the files and log
    the figures to ``parent_id``; the one line that says what was done, or why not."""
    from pydantic import ValidationError

    from raglab.compare.sweep import (
        compare_sweep,
        load_sweep,
        log_to_parent,
        sweep_out_dir,
        write_sweep_files,
    )
    from raglab.errors import UserError
    from raglab.tracking.uris import redact_uri

    why = "sweep comparison not made"
    try:
        jobs, params = load_sweep(str(sweep_dir), uri)
        # only this sweep's jobs (an earlier, larger sweep may have left more folders)
        jobs = [j for j in jobs if j.number.isdigit() and int(j.number) < n_jobs]
        if len(jobs) < 2:
            return f"{why}: the sweep has {len(jobs)} finished job (nothing to compare)"
        base = next((j for j in jobs if j.number == "0"), None)
        if base is None:
            return f"{why}: job 0, the baseline, did not finish"
        sc = compare_sweep(str(sweep_dir), jobs, params, base, compare_settings(config))
        out = sweep_out_dir(str(sweep_dir), base)
        paths = write_sweep_files(sc, out)
        n = log_to_parent(sc, parent_id, uri, paths)
    except UserError as exc:  # metric versions or cases differ, a job did not finish
        return (f"{why}: {' '.join(str(exc).split())} (raglab compare {sweep_dir} "
                "--baseline N takes the --allow-* options)")
    except ValidationError as exc:
        return f"{why}: compare/default.yaml: {exc.errors()[0]['msg']}"
    except Exception as exc:  # noqa: BLE001 - the jobs are done and logged: say why, go on
        return f"{why}: {type(exc).__name__}: {clip_line(exc, 300)}"
    return (f"compared every job with job 0 ({base.name}): {out}/compare.md, compare.html, "
            f"compare.json; logged to the parent run ({n} new or changed sweep.* figures, "
            "the heat map under compare/); another baseline: raglab compare "
            f"{parent_id} --baseline N --uri {redact_uri(uri)}")
