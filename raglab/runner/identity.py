"""What a run directory was started with, so a resume never mixes metric versions.

``run.json`` in the run directory records the metric version of every family when the run
starts. A later run in the same directory (a resume) must have the same versions: a grader
prompt, model or setting that changed, or raglab's own metric code, would otherwise add
verdicts of another version to the same records. Run directories written before this file
existed are checked against their ``metrics.json``, else against their records' verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from raglab.data.io import atomic_write_json
from raglab.errors import UserError, VersionMismatchError

IDENTITY_FILE = "run.json"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def recorded_versions(run_dir: Path) -> tuple[dict[str, str], str] | None:
    """``({family: version}, where they were read)`` for a run directory holding a run, or
    None when it holds none yet. From records, only the families their verdicts name."""
    for name in (IDENTITY_FILE, "metrics.json"):
        data = _read_json(run_dir / name)
        if data is not None and isinstance(data.get("metric_versions"), dict):
            return {str(k): str(v) for k, v in data["metric_versions"].items()}, name
    records = run_dir / "records.jsonl"
    if not records.exists():
        return None
    found: dict[str, str] = {}
    from raglab.data.record import RecordLines

    for _, _, rec in RecordLines(records):  # streamed: one line at a time
        for v in rec.get("verdicts") or []:
            if v.get("family") and v.get("version"):
                found.setdefault(str(v["family"]), str(v["version"]))
    return (found, "records.jsonl") if found else None


def check_resume(run_dir: Path, versions: dict[str, str]) -> None:
    """Refuse, in one line, a run whose metric versions differ from those the run directory
    was started with."""
    got = recorded_versions(run_dir)
    if got is None:
        return
    recorded, source = got
    families = sorted(set(recorded) | set(versions)) if source != "records.jsonl" \
        else sorted(recorded)
    diff = [f"{fam} {recorded.get(fam, 'none')} -> {versions.get(fam, 'none')}"
            for fam in families if recorded.get(fam) != versions.get(fam)]
    if diff:
        raise VersionMismatchError(
            "the run directory was started with other metric versions ("
            + "; ".join(diff) + "): a resume would mix them; choose another hydra.run.dir",
            file=str(run_dir / source))


class DatasetChangedError(UserError):
    """The dataset files differ from those the run directory was started with (exit 2)."""

    exit_code = 2


def recorded_dataset(run_dir: Path) -> tuple[dict[str, str], str] | None:
    """``({"corpus_sha256": ..., "cases_sha256": ...}, file)`` the run directory was started
    with (``run.json``, else a finished run's ``metrics.json``), or None."""
    for name in (IDENTITY_FILE, "metrics.json"):
        data = _read_json(run_dir / name)
        if data is not None and isinstance(data.get("dataset"), dict):
            got = {k: str(v) for k, v in data["dataset"].items()
                   if k in ("corpus_sha256", "cases_sha256") and v}
            if got:
                return got, name
    return None


def check_dataset(run_dir: Path, hashes: dict[str, str]) -> None:
    """Refuse, in one line, a resume whose corpus or cases file changed since the run
    directory was started: its records were scored against the old files (quotes located,
    leaks checked, the reference index built), so mixing them with new ones would give
    metrics of neither dataset."""
    got = recorded_dataset(run_dir)
    if got is None:
        return
    recorded, source = got
    changed = [k.replace("_sha256", "") + f" {recorded[k][:12]} -> {hashes.get(k, '')[:12]}"
               for k in sorted(recorded) if hashes.get(k) and recorded[k] != hashes[k]]
    if changed:
        raise DatasetChangedError(
            "the dataset changed since this run directory was started ("
            + "; ".join(changed) + " sha256): its records were scored against the old files; "
            "choose another hydra.run.dir to run the new dataset", file=str(run_dir / source))


def check_system(run_dir: Path, identity: dict[str, str]) -> None:
    """Refuse, in one line, a resume whose system under test changed under the same config
    (a replay file rewritten at the same path, a python target's source edited): records
    of both would be mixed. A directory started before systems had an identity is not
    checked."""
    data = _read_json(run_dir / IDENTITY_FILE) or {}
    recorded = data.get("system")
    if not isinstance(recorded, dict):
        return
    changed = [f"{k} {str(recorded.get(k))[:12]} -> {str(identity.get(k))[:12]}"
               for k in sorted(set(recorded) | set(identity))
               if recorded.get(k) != identity.get(k)]
    if changed:
        raise DatasetChangedError(
            "the system under test changed since this run directory was started ("
            + "; ".join(changed) + "): a resume would mix the records of both; choose "
            "another hydra.run.dir", file=str(run_dir / IDENTITY_FILE))


def write_identity(run_dir: Path, versions: dict[str, str], config_hash: str,
                   dataset: dict[str, str] | None = None,
                   extra: dict[str, Any] | None = None) -> None:
    data: dict[str, Any] = {"metric_versions": versions, "config_hash": config_hash}
    if dataset:
        data["dataset"] = dict(dataset)
    old = _read_json(run_dir / IDENTITY_FILE) or {}
    for key in ("mlflow",):  # kept across resumes (the run's own MLflow run)
        if key in old:
            data[key] = old[key]
    data.update(extra or {})
    atomic_write_json(run_dir / IDENTITY_FILE, data)


def read_identity(run_dir: Path) -> dict[str, Any]:
    return _read_json(Path(run_dir) / IDENTITY_FILE) or {}


def update_identity(run_dir: Path, **fields: Any) -> None:
    """Add fields to run.json (e.g. the MLflow run that records this directory)."""
    data = read_identity(run_dir)
    data.update(fields)
    atomic_write_json(Path(run_dir) / IDENTITY_FILE, data)
