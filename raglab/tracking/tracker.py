"""The ``tracking`` group: ``none`` (the run directory is the only record) and ``mlflow``
(mlflow is imported lazily, by :mod:`raglab.tracking.mlflow_store` and, for the cases'
traces, :mod:`raglab.tracking.traces`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from raglab import __version__
from raglab.components import NO_CONTEXT, BuildContext, Tracker
from raglab.config import UNLISTED
from raglab.data.schema import Strict
from raglab.registry import register


class _TrackingSettings(Strict):
    """The settings every tracking choice takes (so ``tracking=none`` keeps a run's
    overrides of them valid)."""

    name: str  # each choice narrows it to its own name
    uri: str | None = None
    experiment: str | None = Field(None, min_length=1)  # MLflow refuses an empty name
    # the longest a run waits for an MLflow server that stopped answering (all retries of
    # one request), before it says how to finish the logging later; in the composed
    # config, so tracking.timeout_s=5 works without a +
    timeout_s: float = Field(30.0, gt=0, description=(
        "the longest a run waits for an MLflow server that stopped answering (all retries "
        "of one request, seconds)"))
    slice_metrics: Literal["all", "headline"] = Field("headline", description=(
        "per slice: headline (headline metrics only, the default; the full slice table "
        "stays in the metrics.json artifact and the report) or all (every metric)"))
    traces: Literal["all", "failed", "none"] = Field("all", description=(
        "each case as an MLflow trace linked to the run: all (the default), failed (the "
        "cases with an error or a diagnosis) or none"))
    assessments: Literal["headline", "all"] = Field("headline", description=(
        "feedback on each case's trace: headline (the headline per-case metrics, the "
        "default) or all (every per-case metric)"))


class MlflowTrackingCfg(_TrackingSettings):
    name: Literal["mlflow"]


class NoTrackingCfg(_TrackingSettings):
    name: Literal["none"]
    # (not in conf/tracking/none.yaml: a run without tracking logs no slices)
    slice_metrics: Literal["all", "headline"] = Field("headline", json_schema_extra=UNLISTED)
    traces: Literal["all", "failed", "none"] = Field("all", json_schema_extra=UNLISTED)
    assessments: Literal["headline", "all"] = Field("headline", json_schema_extra=UNLISTED)


def git_commit(cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


@register("tracking", "none", config=NoTrackingCfg)
class NoTracker(Tracker):
    """``tracking=none``: the run directory is the only record (every method of
    :class:`raglab.components.Tracker` does nothing)."""


@register("tracking", "mlflow", config=MlflowTrackingCfg)
class MlflowTracker(Tracker):
    """Creates the MLflow run when the run starts, fills it when the run ends."""

    tracks = True

    def __init__(self, cfg: MlflowTrackingCfg, ctx: BuildContext = NO_CONTEXT):
        super().__init__(cfg, ctx)
        self.resolved = ctx.resolved
        self.run_name = ctx.run_name
        self.sweep_dir = ctx.sweep_dir
        self.run: Any = None
        self.traces: Any = None  # the TraceWriter of the run's cases (tracking.traces)
        self.resumed = False

    def check(self) -> None:
        from raglab.tracking.mlflow_store import bound_waits, check_tracking

        bound_waits(self.cfg.timeout_s)
        check_tracking(self.cfg.uri)

    def started(self, dataset: Any, versions: dict[str, str], self_graded: bool = False) -> None:
        from raglab.tracking.keys import flatten_config
        from raglab.tracking.mlflow_store import MlflowRun

        tags = {f"raglab.metric_version.{k}": v for k, v in versions.items()}
        tags.update({
            "raglab.version": __version__,
            "raglab.dataset": self.ctx.run.dataset.name,
            "raglab.dataset.corpus_sha256": dataset.corpus_hash,
            "raglab.dataset.cases_sha256": dataset.cases_hash,
            "raglab.quarantined": str(len(dataset.quarantined)),
            # the grader's model is the generator's (self-preference bias; docs/graders.md)
            "raglab.self_graded": "true" if self_graded else "false",
        })
        commit = git_commit(Path.cwd())
        if commit:
            tags["raglab.git_commit"] = commit
        previous = None  # a resumed run continues its own MLflow run (no orphan RUNNING)
        remember = None
        files = self.ctx.run_files
        if self.run_dir is not None and files is not None:
            previous = files.tracked_identity(self.run_dir)

            def remember(identity: dict) -> None:  # before the run exists, then its id
                files.remember_identity(self.run_dir, identity)
        self.run = MlflowRun.start(self.cfg.uri, self.cfg.experiment,
                                   self.run_name, flatten_config(self.resolved), tags,
                                   sweep_dir=self.sweep_dir, resume=previous,
                                   remember=remember, sweep_name=self.ctx.sweep_name)
        self.resumed = previous is not None
        if self.cfg.traces != "none":
            try:
                self.traces = self._trace_writer(dataset, versions)
            except Exception as exc:  # noqa: BLE001 - the traces are a view, not the run
                print(f"raglab: warning: MLflow traces are not written: {exc}",
                      file=sys.stderr, flush=True)

    def _trace_writer(self, dataset: Any, versions: dict[str, str]) -> Any:
        from raglab import registry
        from raglab.tracking.traces import TraceWriter

        section = self.ctx.run.grader if self.ctx.run is not None else None
        grader = section.name if section is not None else "none"
        try:  # a grader that calls a model is an LLM judge (its class says which model)
            cls = registry.entry("grader", grader).factory
            llm_judge = bool(cls.grades and cls.model_id(section))
        except Exception:  # noqa: BLE001 - an unknown grader grades nothing
            llm_judge = False
        return TraceWriter(self.run.uri, self.run.experiment_id, self.run.run_id,
                           {c.id: c for c in dataset.cases}, versions, grader, llm_judge,
                           traces=self.cfg.traces, assessments=self.cfg.assessments,
                           dataset_name=self.ctx.run.dataset.name
                           if self.ctx.run is not None else "cases")

    def case_recorded(self, record: Any) -> None:
        if self.traces is not None:
            self.traces.submit(record)

    def _close_traces(self, run_dir: Path | None = None) -> None:
        writer, self.traces = self.traces, None
        if writer is not None:
            # a resumed run traces the recorded cases its earlier process did not
            writer.close(run_dir / "records.jsonl" if run_dir is not None and self.resumed
                         else None)

    def finished(self, run_dir: Path) -> None:
        if self.run is None:
            return
        from raglab.data.io import read_run_metrics

        self._close_traces(Path(run_dir))
        files = self.ctx.run_files
        metrics = read_run_metrics(run_dir)
        self.run.finish(run_dir, slice_metrics=self.cfg.slice_metrics,
                        report=files.report_files(run_dir) if files is not None else [],
                        describe=lambda link: files.description(
                            self.run_name, metrics, self.resolved, self.diffs, link)
                        if files is not None else "")

    def killed(self) -> None:
        self._close_traces()
        if self.run is not None:
            self.run.kill()

    def failed(self, message: str) -> None:
        self._close_traces()
        if self.run is not None:
            self.run.fail(message)

    def where(self) -> str | None:
        if self.run is None:
            return None
        from raglab.tracking.mlflow_store import ui_command
        from raglab.tracking.mlflow_ui import run_url

        text = (f"MLflow run {self.run.run_id} {self.run_name!r} (experiment "
                f"{self.cfg.experiment!r}); view it with:\n"
                f"  {ui_command(self.cfg.uri)}\n"
                "  then open "
                f"{run_url(self.cfg.uri, self.run.experiment_id, self.run.run_id)}")
        if self.cfg.traces != "none":
            from raglab.tracking.traces import traces_url

            text += ("\n  its cases, one trace each: "
                     f"{traces_url(self.cfg.uri, self.run.experiment_id, self.run.run_id)}")
        return text
