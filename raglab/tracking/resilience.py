"""What keeps MLflow failures bounded and runs whole across resumes (imported lazily by
:mod:`.mlflow_store`; mlflow itself is imported inside the functions).

- :func:`bound_waits`: MLflow's HTTP retry settings, bounded by ``tracking.timeout_s``.
- :func:`unfinished_run` / ``resumable_run``: the MLflow run a run directory started (its id is
  in ``run.json``), continued by a resume or by ``raglab log`` instead of left RUNNING.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

#: MLflow's own retry settings for HTTP stores; raglab bounds them unless the user set them
_WAIT_VARS = ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
              "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", "MLFLOW_HTTP_REQUEST_TIMEOUT")
_USER_WAITS: set[str] | None = None


def bound_waits(timeout_s: float) -> None:
    """Bound what one MLflow request may cost against a server that stopped answering:
    3 attempts of ``timeout_s / 3`` each, 1 s then 2 s apart (MLflow's defaults: 7 retries
    of up to 120 s, about 250 s against a dead server). Variables the user set are kept."""
    global _USER_WAITS
    if _USER_WAITS is None:
        _USER_WAITS = {v for v in _WAIT_VARS if v in os.environ}
    values = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
              "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
              "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.2",
              "MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, int(timeout_s / 3)))}
    for name, value in values.items():
        if name not in _USER_WAITS:
            os.environ[name] = value


#: a tag set when a run is created, recorded in ``run.json`` before the run exists: a
#: process killed between creating its run and recording the run's id is found by it
START_TOKEN_TAG = "raglab.start_token"


def resumable_run(client, uri: str, exp_id: str, resume: Mapping[str, Any] | None) -> str | None:
    """The run id of ``resume`` when it names a live run of this store and experiment: by
    its id, or, when only its start token was recorded (killed just after creating it), by
    the run that carries that token."""
    if not isinstance(resume, Mapping):
        return None
    from mlflow.exceptions import MlflowException

    if not resume.get("run_id"):
        token = str(resume.get("token") or "")
        if not token.isalnum() or str(resume.get("experiment_id")) != str(exp_id):
            return None
        try:
            runs = client.search_runs([exp_id], filter_string=f"tags.`{START_TOKEN_TAG}` = "
                                      f"'{token}'", max_results=1)
        except MlflowException:
            return None
        return runs[0].info.run_id if runs else None
    try:  # run ids are unique: the same id in this store (by any URI) is the same run
        info = client.get_run(str(resume["run_id"])).info
    except MlflowException:
        return None
    if info.lifecycle_stage != "active" or str(info.experiment_id) != str(exp_id):
        return None
    return info.run_id


def unfinished_run(uri: str, experiment: str, resume: Mapping[str, Any] | None) -> str | None:
    """The run a run directory started (``run.json``) when this store holds it and it is
    not FINISHED (the store failed mid-run): ``raglab log`` finishes that run."""
    from raglab.tracking.client import _client
    from raglab.tracking.uris import normalize_uri

    uri = normalize_uri(uri)
    client = _client(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None or exp.lifecycle_stage != "active":
        return None
    run_id = resumable_run(client, uri, exp.experiment_id, resume)
    if run_id is None or client.get_run(run_id).info.status == "FINISHED":
        return None
    return run_id
