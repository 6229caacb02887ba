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

from raglab.data.io import atomic_write_json, read_jsonl_tolerant
from raglab.errors import VersionMismatchError

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
    for rec in read_jsonl_tolerant(records):
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


def write_identity(run_dir: Path, versions: dict[str, str], config_hash: str) -> None:
    atomic_write_json(run_dir / IDENTITY_FILE,
                      {"metric_versions": versions, "config_hash": config_hash})
