"""MLflow runs of the commands that are not evaluation runs (calibrate, monitor).

Same conventions as :mod:`.mlflow_store` (the client, experiments with absolute artifact
locations, legal keys, batched logging); metrics may be time series: ``(key, value,
timestamp_ms, step)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from raglab.secrets import clip
from raglab.tracking.batching import log_batches
from raglab.tracking.client import _client
from raglab.tracking.keys import is_legal_key, metric_key
from raglab.tracking.mlflow_store import MAX_TAG_VALUE_LENGTH, _param_value
from raglab.tracking.store_setup import experiment_id
from raglab.tracking.uris import normalize_uri


def log_standalone_run(uri: str, experiment: str, run_name: str, *,
                       params: Mapping[str, Any] | None = None,
                       metrics: Mapping[str, float | None] | None = None,
                       series: Iterable[tuple[str, float, int, int]] = (),
                       tags: Mapping[str, str] | None = None,
                       artifacts: Sequence[Path] = ()) -> str:
    """Create, fill and finish one run; returns its id. ``metrics`` (step 0, now) and
    ``series`` (``(key, value, timestamp_ms, step)``) keys are made legal with
    :func:`~raglab.tracking.keys.metric_key`; None values are skipped."""
    import time

    from mlflow.entities import Metric, Param, RunTag

    uri = normalize_uri(uri)
    client = _client(uri)
    exp_id = experiment_id(client, uri, experiment)
    run = client.create_run(exp_id, run_name=run_name)
    run_id = run.info.run_id
    try:
        ps = [Param(metric_key(k), _param_value(v)) for k, v in (params or {}).items()
              if is_legal_key(metric_key(k))]
        now = int(time.time() * 1000)
        ms = [Metric(metric_key(k), float(v), now, 0) for k, v in (metrics or {}).items()
              if v is not None]
        ms += [Metric(metric_key(k), float(v), int(ts), int(step))
               for k, v, ts, step in series if v is not None]
        ts_ = [RunTag(k, clip(str(v), MAX_TAG_VALUE_LENGTH)) for k, v in (tags or {}).items()]
        log_batches(client, run_id, metrics=ms, params=ps, tags=ts_)
        for path in artifacts:
            if Path(path).is_file():
                client.log_artifact(run_id, str(path))
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    return run_id


def find_calibrations(uri: str, experiment: str, versions: Mapping[str, str],
                      sections: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """``{family: record}`` of the latest calibration run tagged with each family's version;
    ``sections[family]`` names the metrics' prefix (records shaped like
    :func:`raglab.calibration.records.record_of`'s, figures only)."""
    uri = normalize_uri(uri)
    client = _client(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return {}
    runs = client.search_runs([exp.experiment_id], filter_string="attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time DESC"], max_results=500)
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        tags, m = run.data.tags, run.data.metrics
        for fam, ver in versions.items():
            if fam in out or tags.get(f"raglab.metric_version.{fam}") != ver:
                continue
            section = sections[fam]
            if f"{section}.n" not in m:
                continue
            out[fam] = {section: {"n": int(m[f"{section}.n"]),
                                  "kappa": m.get(f"{section}.kappa"),
                                  "ci_low": m.get(f"{section}.kappa_ci_low"),
                                  "ci_high": m.get(f"{section}.kappa_ci_high"),
                                  "kappa_lcb": m.get(f"{section}.kappa_lcb")},
                        "labels": {"path": tags.get("raglab.labels"),
                                   "sha256": tags.get("raglab.labels_sha256")},
                        "dataset": _dataset(tags),
                        "grader": tags.get("raglab.grader"), "created": _iso(run.info.start_time),
                        "run_dir": tags.get("raglab.run_dir"), "mlflow_run_id": run.info.run_id}
    return out


def _dataset(tags: Mapping[str, str]) -> dict[str, Any] | None:
    """The labels' dataset a calibration run's tags name, or None (an older run)."""
    pre = "raglab.calibration.dataset."
    name, n, sha = (tags.get(pre + k) for k in ("name", "n_cases", "cases_sha256"))
    if name is None and sha is None:
        return None
    return {"name": name, "n_cases": int(n) if n and n.isdigit() else None,
            "cases_sha256": sha}


def _iso(ms: int | None) -> str | None:
    from datetime import UTC, datetime

    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).isoformat(
        timespec="seconds")


def calibration_finder(uri: str, experiment: str = "raglab-calibration"):
    """A ``tracked`` argument for :func:`raglab.calibration.records.lookup`: the calibration
    records of the MLflow store at ``uri``."""
    def find(versions: Mapping[str, str], sections: Mapping[str, str]) -> dict[str, Any]:
        return find_calibrations(uri, experiment, versions, sections)

    return find
