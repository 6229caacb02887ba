"""Logging runs to MLflow (mlflow is imported lazily, inside the functions).

A run is created with ``MlflowClient`` (never the fluent global state) so several runs, a
sweep's parent and its children, can be open in one process. A sweep has no start hook, so
the first job creates the parent run (:func:`raglab.tracking.store_setup.sweep_parent`,
under a file lock in the sweep directory, its id in ``<sweep_dir>/.mlflow_parent``); later
jobs (same or other processes) reuse it. The parent's status follows the last child to end
(FINISHED, KILLED or FAILED). When the sweep ends,
:func:`raglab.tracking.mlflow_ui.summarize_sweep` fills the parent in.

Layout of a logged run: params = the flattened config (secrets dropped); metrics = every
non-null overall metric (``metric_key``), every slice metric (or, with
``tracking.slice_metrics=headline``, every headline one) and slice size
(``slice_metric_key``), ``n_cases``, ``n_quarantined``, ``errors``, ``work.<counter>``;
tags ``raglab.metric_version.<family>``, ``raglab.run_dir``, ``raglab.config_hash``,
``raglab.content_sha256`` (of records.jsonl and metrics.json, as logged) and the
description ``mlflow.note.content``; artifacts ``config.yaml``, ``records.jsonl``,
``metrics.json``, ``quarantine.jsonl`` (when present) at the root and the report
(``report.md``, ``report.html`` and plots) under ``report/``; the cases file as a dataset
input. What the UI opens on (layout, saved views) is :mod:`raglab.tracking.mlflow_ui`.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from raglab.errors import UserError
from raglab.secrets import clip
from raglab.tracking.batching import log_batches
from raglab.tracking.client import _client
from raglab.tracking.keys import (
    MAX_PARAM_VALUE_LENGTH,
    flatten_config,
    is_legal_key,
    is_secret_key,
    metric_key,
    metrics_from_summary,
)
from raglab.tracking.resilience import START_TOKEN_TAG, bound_waits, resumable_run, unfinished_run  # noqa: F401
from raglab.tracking.store_setup import existing_client, experiment_id, sweep_parent
from raglab.tracking.uris import check_tracking, normalize_uri, ui_command

__all__ = ["MlflowRun", "log_run_dir", "check_tracking", "ui_command", "normalize_uri",
           "CASES_HASH_TAG"]

log = logging.getLogger(__name__)

MAX_TAG_VALUE_LENGTH = 8000
CASES_HASH_TAG = "raglab.dataset.cases_sha256"


def _param_value(value: Any) -> str:
    """A param's value as logged: scrubbed of known secrets, then cut to MLflow's limit."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return clip(str(value), MAX_PARAM_VALUE_LENGTH)


def _set_terminated(client, run_id: str | None, status: str) -> None:
    if run_id:
        client.set_terminated(run_id, status=status)


# ---- runs ----------------------------------------------------------------------------------
class MlflowRun:
    """One raglab run in MLflow (a child of the sweep's parent run when in a sweep)."""

    # set by start(), not by the constructor (identity() reads them with getattr)
    token: str | None
    uri: str

    def __init__(self, client, run_id: str, parent_run_id: str | None = None,
                 tags: Mapping[str, str] | None = None, experiment_id: str | None = None):
        self._client = client
        self._run_id = run_id
        self.experiment_id = experiment_id
        self.parent_run_id = parent_run_id
        self._tags = dict(tags) if tags is not None else None

    @property
    def run_id(self) -> str:
        return self._run_id

    @classmethod
    def start(cls, uri: str, experiment: str, run_name: str | None,
              params: Mapping[str, str | int | float | bool | None] | None = None,
              tags: Mapping[str, str] | None = None, sweep_dir: str | Path | None = None,
              resume: Mapping[str, Any] | None = None,
              remember: Callable[[dict], None] | None = None,
              sweep_name: str | None = None) -> MlflowRun:
        """A new run, or, with ``resume`` (a previous :meth:`identity` of the same run
        directory), that run again, set back to RUNNING, when the store still holds it.
        ``remember`` records an identity where a resume will find it: a start token before
        the run is created, then the run's id at once, so a process killed at any moment
        leaves no run that its resume cannot continue. ``sweep_name``: the name of the
        sweep's parent run when this job creates it (else the sweep directory's name)."""
        import uuid

        from raglab.secrets import scrub

        uri = normalize_uri(uri)
        client = _client(uri)
        exp_id = experiment_id(client, uri, experiment)
        parent = sweep_parent(client, exp_id, uri, Path(sweep_dir),
                              scrub(sweep_name) if sweep_name else None) if sweep_dir else None
        run_tags = {str(k): clip(str(v), MAX_TAG_VALUE_LENGTH)
                    for k, v in (tags or {}).items() if v is not None}
        if parent:
            run_tags["mlflow.parentRunId"] = parent
        run_name = scrub(run_name) if run_name else run_name
        old = resumable_run(client, uri, exp_id, resume)
        if old is not None:
            client.update_run(old, status="RUNNING")
            self = cls(client, old, parent, run_tags, exp_id)
            self.token = (resume or {}).get("token")
            self._log_tags(run_tags)
            have = set(client.get_run(old).data.params)  # params cannot change: add new ones
            params = {k: v for k, v in (params or {}).items() if metric_key(k) not in have}
        else:
            token = uuid.uuid4().hex
            if remember is not None:
                remember({"uri": uri, "experiment_id": str(exp_id), "token": token})
            run = client.create_run(exp_id, run_name=run_name,
                                    tags={**run_tags, START_TOKEN_TAG: token})
            self = cls(client, run.info.run_id, parent, run_tags, exp_id)
            self.token = token
        self.uri = uri
        if remember is not None:
            remember(self.identity())
        self._log_params(params or {})
        return self

    def identity(self) -> dict[str, str]:
        """What a resume needs to find this run again (kept in the run directory)."""
        out = {"uri": getattr(self, "uri", ""), "experiment_id": str(self.experiment_id),
               "run_id": self._run_id}
        if getattr(self, "token", None):
            out["token"] = self.token
        return out

    def _log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        clean: dict[str, str] = {}
        for k, v in params.items():
            key = metric_key(k)
            if is_secret_key(k):
                continue
            if not is_legal_key(key):
                log.warning("MLflow: param %r skipped (not a legal key)", k)
                continue
            clean[key] = _param_value(v)
        log_batches(self._client, self._run_id, params=[Param(k, v) for k, v in clean.items()])

    def finish(self, run_dir: Path, describe: Callable[[str], str] | None = None,
               slice_metrics: str = "all", report: Sequence[Path] = ()) -> None:
        """Log metrics, tags, artifacts and dataset of a finished run dir; status FINISHED.
        ``report``: the files of the run's report, logged under ``report/``.

        ``describe(report_link)`` gives the run's description (markdown shown at the top of
        its page); ``slice_metrics="headline"`` logs only headline metrics per slice (the
        full table stays in the metrics.json artifact)."""
        from raglab.metrics.catalog import HEADLINE
        from raglab.tracking import mlflow_ui

        run_dir = Path(run_dir).absolute()
        summary = _read_metrics(run_dir)
        tags = {f"raglab.metric_version.{fam}": str(ver)
                for fam, ver in (summary.get("metric_versions") or {}).items() if ver is not None}
        tags[mlflow_ui.RUN_DIR_TAG] = str(run_dir)
        # what is logged, so `raglab log` can tell a changed run directory from a logged one
        tags[mlflow_ui.CONTENT_HASH_TAG] = mlflow_ui.content_hash(run_dir)
        if summary.get("config_hash"):
            tags[mlflow_ui.CONFIG_HASH_TAG] = str(summary["config_hash"])
        if "self_graded" in summary:  # final: the outputs may report the judge's model
            tags["raglab.self_graded"] = "true" if summary["self_graded"] else "false"
        if describe is not None and self.experiment_id is not None:
            tags[mlflow_ui.NOTE_TAG] = describe(mlflow_ui.report_link(self.experiment_id,
                                                                      self._run_id))
        self.log_metrics(metrics_from_summary(
            summary, slice_names=set(HEADLINE) if slice_metrics == "headline" else None), tags)
        if self.experiment_id is not None:
            try:
                mlflow_ui.prepare_experiment(self._client, self.experiment_id, HEADLINE)
            except Exception as exc:  # noqa: BLE001 - a view is a convenience, not the run
                log.warning("MLflow experiment view not set: %s", exc)
        self._log_artifacts(run_dir, report)
        self._log_dataset(run_dir)
        self.end("FINISHED")

    def end(self, status: str = "FINISHED") -> None:
        """Set the run's status (FINISHED, KILLED or FAILED) and the sweep parent's."""
        _set_terminated(self._client, self._run_id, status)
        _set_terminated(self._client, self.parent_run_id, status)

    def log_metrics(self, metrics: Mapping[str, float],
                    tags: Mapping[str, str] | None = None) -> None:
        """Log ``{key: value}`` (keys already legal; step 0, one timestamp) and ``tags`` in
        the fewest log_batch requests (:func:`~raglab.tracking.batching.log_batches`)."""
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        items = [Metric(k, float(v), ts, 0) for k, v in metrics.items()]
        log_batches(self._client, self._run_id, metrics=items, tags=self._tag_entities(tags))

    def _log_tags(self, tags: Mapping[str, str]) -> None:
        log_batches(self._client, self._run_id, tags=self._tag_entities(tags))

    @staticmethod
    def _tag_entities(tags: Mapping[str, str] | None) -> list:
        from mlflow.entities import RunTag

        return [RunTag(k, clip(str(v), MAX_TAG_VALUE_LENGTH)) for k, v in (tags or {}).items()]

    def _log_artifacts(self, run_dir: Path, report: Sequence[Path]) -> None:
        for name in ("config.yaml", "records.jsonl", "metrics.json", "quarantine.jsonl"):
            if (run_dir / name).is_file():
                self._client.log_artifact(self._run_id, str(run_dir / name))
        for path in report:
            self._client.log_artifact(self._run_id, str(path), artifact_path="report")

    def _log_dataset(self, run_dir: Path) -> None:
        cfg = _read_config(run_dir)
        given = cfg.get("dataset")
        ds_cfg = given if isinstance(given, Mapping) else {}
        cases = ds_cfg.get("cases")
        if not cases:
            return
        from mlflow.entities import DatasetInput, InputTag

        run_tags = self._tags
        if run_tags is None:
            run_tags = self._client.get_run(self._run_id).data.tags
        digest = run_tags.get(CASES_HASH_TAG) or _cases_hash(str(cases))
        entity = _dataset_entity(str(ds_cfg.get("name") or "cases"), str(cases),
                                 (digest or "unknown")[:16])
        input_tags = [InputTag("mlflow.data.context", "eval")]
        if digest:
            input_tags.append(InputTag(CASES_HASH_TAG, digest))
        self._client.log_inputs(self._run_id, datasets=[DatasetInput(entity, tags=input_tags)])

    def kill(self) -> None:
        """Mark the run (and the sweep parent) KILLED, e.g. on Ctrl-C."""
        self.end("KILLED")

    def fail(self, message: str) -> None:
        """Mark the run (and the sweep parent) FAILED, keeping the reason as a tag."""
        self._log_tags({"raglab.error": " ".join(str(message).split())})
        self.end("FAILED")


def _dataset_entity(name: str, cases: str, digest: str):
    """An MLflow dataset entity for the cases file (a MetaDataset: metadata only)."""
    from mlflow.data.meta_dataset import MetaDataset

    class CasesDataset(MetaDataset):
        # mlflow's Dataset declares ``profile`` abstract (not enforced: it is no ABC) and
        # MetaDataset leaves it out; a metadata-only dataset has no profile
        @property
        def profile(self) -> None:
            return None

    source_uri = cases
    if "://" not in cases:
        source_uri = str(Path(cases).expanduser().absolute())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            from mlflow.data.dataset_source_registry import resolve_dataset_source
            source = resolve_dataset_source(source_uri)
        except Exception:  # noqa: BLE001 - e.g. pkg:// has no registered source
            from mlflow.data.code_dataset_source import CodeDatasetSource
            source = CodeDatasetSource({"uri": source_uri})
        return CasesDataset(source, name=name[:500], digest=digest)._to_mlflow_entity()


def _cases_hash(cases: str) -> str | None:
    try:
        from raglab.data.dataset import file_sha256, resolve_path
        return file_sha256(resolve_path(cases))
    except Exception:  # noqa: BLE001 - the file may be gone when logging later
        return None


# ---- run directories -----------------------------------------------------------------------
def _read_metrics(run_dir: Path) -> dict:
    from raglab.data.io import read_run_metrics

    return read_run_metrics(run_dir)


def _read_config(run_dir: Path) -> dict:
    from raglab.data.io import read_run_config

    return read_run_config(run_dir)


def _slice_metrics(cfg: Mapping[str, Any]) -> str:
    """A run config's ``tracking.slice_metrics`` (``all`` or ``headline``, the default)."""
    tracking = cfg.get("tracking")
    value = tracking.get("slice_metrics") if isinstance(tracking, Mapping) else None
    return "all" if value == "all" else "headline"


def log_run_dir(run_dir: Path, uri: str, experiment: str, run_name: str | None = None,
                params: Mapping[str, Any] | None = None,
                tags: Mapping[str, str] | None = None,
                describe: Callable[[str], str] | None = None,
                resume: Mapping[str, Any] | None = None,
                report: Sequence[Path] = ()) -> str:
    """Log a finished run directory (``raglab log RUN_DIR``); returns the MLflow run id.
    ``resume``: the run the directory started (continued when the store holds it);
    ``report``: the files of its report. Slice metrics follow the run's own
    ``tracking.slice_metrics`` (``headline`` when its config has none), as the run would
    have logged them."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such run directory")
    _read_metrics(run_dir)  # fail before creating anything
    cfg = _read_config(run_dir)
    all_params: dict[str, Any] = dict(flatten_config(cfg))
    all_params.update(params or {})
    name = run_name or (cfg.get("run_name") if isinstance(cfg.get("run_name"), str) else None) \
        or run_dir.absolute().name
    run = MlflowRun.start(uri, experiment, name, all_params, dict(tags or {}), resume=resume)
    try:
        run.finish(run_dir, describe=describe, report=report,
                   slice_metrics=_slice_metrics(cfg))
    except KeyboardInterrupt:
        run.kill()
        raise
    except Exception as exc:
        run.fail(f"logging failed: {exc}")
        raise
    return run.run_id


# ---- reading runs back (raglab compare) ----------------------------------------------------
RUN_FILES = ("records.jsonl", "metrics.json", "config.yaml")


def _run_info(run) -> dict[str, Any]:
    tags = dict(run.data.tags)
    return {"run_id": run.info.run_id, "status": run.info.status,
            "run_name": run.info.run_name or tags.get("mlflow.runName"),
            "tags": tags, "params": dict(run.data.params),
            "parent_run_id": tags.get("mlflow.parentRunId")}


def read_run(run_id: str, uri: str, dest: Path) -> dict[str, Any]:
    """Download a run's ``records.jsonl``, ``metrics.json`` and ``config.yaml`` (those it has)
    into ``dest``; return its id, status, name, tags, params and parent id.
    UserError when the store or the run does not exist."""
    from mlflow.exceptions import MlflowException

    client = existing_client(uri)
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise UserError(f"unknown MLflow run id {run_id!r} in {ui_command(uri).split()[-1]}") \
            from None
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    present = {f.path for f in client.list_artifacts(run_id)}
    # MLflow draws a progress bar per download on stderr: noise beside raglab's one line
    bar = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    before = os.environ.get(bar)
    os.environ[bar] = "false"
    try:
        for name in RUN_FILES:
            if name in present:
                client.download_artifacts(run_id, name, str(dest))
    finally:
        if before is None:
            os.environ.pop(bar, None)
        else:
            os.environ[bar] = before
    return _run_info(run)


def child_runs(parent_run_id: str, uri: str) -> list[dict[str, Any]]:
    """The child runs of a sweep's parent run, oldest first (``_run_info`` dicts)."""
    client = existing_client(uri)
    parent = client.get_run(parent_run_id)
    runs = client.search_runs([parent.info.experiment_id],
                              filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'",
                              max_results=10000, order_by=["attributes.start_time ASC"])
    return [_run_info(r) for r in runs]


def log_files_to_run(run_id: str, uri: str, paths: list[Path], artifact_path: str | None = None,
                     tags: Mapping[str, str] | None = None) -> None:
    """Add files as artifacts of an existing run (any status) and set tags on it."""
    client = existing_client(uri)
    for path in paths:
        client.log_artifact(run_id, str(path), artifact_path=artifact_path)
    for key, value in (tags or {}).items():
        client.set_tag(run_id, key, clip(str(value), MAX_TAG_VALUE_LENGTH))
