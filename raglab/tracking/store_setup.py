"""Setting up an MLflow store for raglab's runs: its experiments (with absolute artifact
locations, so a store can be read from any directory), a sweep's parent run (created once by
the first job, under a lock in the sweep directory) and a client for a store that must
already exist. Logging into the runs is :mod:`raglab.tracking.mlflow_store`'s; mlflow is
imported inside the functions."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from raglab.errors import UserError
from raglab.tracking.client import PARENT_FILE, PARENT_LOCK, _client, _locked
from raglab.tracking.uris import check_tracking, normalize_uri, scheme_of, sqlite_path


def _artifact_location(uri: str, experiment: str) -> str | None:
    if scheme_of(uri) in ("http", "https", "databricks"):
        return None  # the server decides
    db = sqlite_path(uri)
    root = db.parent if db is not None else Path.cwd()
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", experiment).strip("._") or "experiment"
    return (root / "mlartifacts" / safe).as_uri()


def experiment_id(client, uri: str, name: str) -> str:
    from mlflow.exceptions import MlflowException

    for _ in range(2):
        exp = client.get_experiment_by_name(name)
        if exp is not None:
            if exp.lifecycle_stage != "active":
                raise UserError(f"MLflow experiment {name!r} is deleted; restore it (mlflow "
                                "experiments restore) or choose another tracking.experiment")
            return exp.experiment_id
        try:
            return client.create_experiment(name, artifact_location=_artifact_location(uri, name))
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise  # else another process created it meanwhile: read it back
    raise UserError(f"could not create MLflow experiment {name!r}")


def sweep_parent(client, exp_id: str, uri: str, sweep_dir: Path, name: str | None = None
                 ) -> str:
    """The sweep's parent run id, created by the first job under an exclusive lock, named
    ``name`` (the sweep's own name; else its directory's) from the start, so a sweep still
    running, or stopped, says what it runs."""
    sweep_dir = sweep_dir.absolute()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    state_path = sweep_dir / PARENT_FILE
    with _locked(sweep_dir / PARENT_LOCK):
        try:
            state = json.loads(state_path.read_text(encoding="utf-8"))
            parents = [p for p in state.get("parents", []) if isinstance(p, dict)]
        except (OSError, ValueError, AttributeError):
            parents = []
        for p in parents:
            if p.get("uri") == uri and p.get("experiment_id") == exp_id:
                try:
                    if client.get_run(p["run_id"]).info.lifecycle_stage == "active":
                        return p["run_id"]
                except Exception:  # noqa: BLE001 - gone from the store: make a new one
                    pass
        parent = client.create_run(exp_id, run_name=name or sweep_dir.name,
                                   tags={"raglab.sweep_dir": str(sweep_dir)})
        parents = [p for p in parents if not (p.get("uri") == uri
                                              and p.get("experiment_id") == exp_id)]
        parents.append({"uri": uri, "experiment_id": exp_id, "run_id": parent.info.run_id})
        tmp = state_path.with_name(PARENT_FILE + ".tmp")
        tmp.write_text(json.dumps({"parents": parents}, indent=1), encoding="utf-8")
        os.replace(tmp, state_path)
        return parent.info.run_id


def existing_client(uri: str):
    """A client for a store that must already exist (reading never creates a database)."""
    uri = normalize_uri(uri)
    check_tracking(uri)
    db = sqlite_path(uri)
    if db is not None and not db.is_file():
        raise UserError(f"no MLflow store at {db}")
    return _client(uri)
