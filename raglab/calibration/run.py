"""One calibration: labels -> grader judgments -> figures -> files, record, MLflow."""

from __future__ import annotations

import asyncio
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from raglab import registry
from raglab.cache import StageCache
from raglab.calibration.judge import judge_labels
from raglab.calibration.labels import load_labels
from raglab.calibration.records import EXPERIMENT, append_record, record_of
from raglab.calibration.summary import markdown, summarise
from raglab.data.dataset import dataset_identity, file_sha256, load_cases, resolve_path
from raglab.data.io import atomic_write_json, atomic_write_text
from raglab.errors import ConfigError
from raglab.graders.standalone import open_grading, prepare
from raglab.systems.base import WorkCounter


class GraderCallsFailed(Exception):
    """Some grader calls still failed after their retries (nothing was recorded)."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__(f"{len(errors)} grader call(s) failed")


def calibrate(cfg: Any, resolved: dict[str, Any], run_dir: Path, *, seed: int,
              resamples: int) -> dict[str, Any]:
    """Calibrate ``cfg.grader`` on ``cfg.dataset.labels``; returns calibration.json's
    content (plus ``store``, where the record went, and ``mlflow_run_id``). Bad labels
    raise UserError before anything is written."""
    if not cfg.dataset.labels:
        raise ConfigError("dataset.labels is not set (a labels file: docs/data.md)")
    labels_path = resolve_path(cfg.dataset.labels)
    cases_path = resolve_path(cfg.dataset.cases)
    cases, _ = load_cases(cases_path)
    questions = {c.id: c.question for c in cases}
    labels = load_labels(labels_path, questions)
    prompts, versions = prepare(cfg)
    tracked = registry.entry("tracking", cfg.tracking.name).factory.tracks
    if tracked:
        from raglab.tracking.mlflow_store import check_tracking

        check_tracking(cfg.tracking.uri)
    cache = StageCache(cfg.cache_dir)
    work = WorkCounter()
    repeats = getattr(cfg.grader, "repeats", 1)

    async def go():
        async with open_grading(cfg, prompts, versions, cache, work, repeats) as grading:
            judged, errors = await judge_labels(grading, labels, questions)
            usage = grading.llm.summary() if grading.llm is not None else None
            return grading.repeats, judged, errors, usage

    independent, judged, errors, usage = asyncio.run(go())
    if errors:
        raise GraderCallsFailed(errors)
    result = summarise(labels, judged, repeats=repeats, independent=independent, seed=seed,
                       n_resamples=resamples)
    doc: dict[str, Any] = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "grader": cfg.grader.name, "versions": versions, "repeats": repeats,
        "labels": {"path": str(cfg.dataset.labels), "resolved": str(labels_path),
                   "sha256": file_sha256(labels_path), "n": len(labels)},
        # the dataset the labels came from: a decision on another one is flagged
        "dataset": {"name": dataset_identity(str(cfg.dataset.name), str(cfg.dataset.corpus),
                                             str(cfg.dataset.cases))["name"],
                    "n_cases": len(cases),
                    "cases_sha256": file_sha256(cases_path)},
        "work": work.as_dict(), **({"model_usage": usage} if usage else {}), **result}
    run_dir.mkdir(parents=True, exist_ok=True)
    mlflow_id = _log(cfg, resolved, doc, run_dir) if tracked else None
    atomic_write_text(run_dir / "calibration.md", markdown(doc))
    atomic_write_json(run_dir / "calibration.json", doc)
    store = append_record(cfg.cache_dir, record_of(doc, str(run_dir), mlflow_id))
    return {**doc, "store": str(store), "mlflow_run_id": mlflow_id}


def _log(cfg: Any, resolved: dict[str, Any], doc: dict[str, Any], run_dir: Path) -> str:
    """Log the calibration to MLflow (figures, tags, both files) before they are written
    into the run directory, so a failed logging leaves no finished-looking directory."""
    from raglab.tracking.keys import flatten_config
    from raglab.tracking.standalone import log_standalone_run

    metrics: dict[str, float | None] = {}
    for sec in ("claims", "nuggets"):
        s = doc[sec]
        metrics.update({f"{sec}.n": s["n"], f"{sec}.kappa": s["kappa"],
                        f"{sec}.kappa_ci_low": s["ci_low"], f"{sec}.kappa_ci_high": s["ci_high"],
                        f"{sec}.kappa_lcb": s.get("kappa_lcb"),
                        f"{sec}.accuracy": s["accuracy"]["value"],
                        f"{sec}.leniency": s["leniency"]["value"]})
        if "weighted_kappa" in s:
            metrics[f"{sec}.weighted_kappa"] = s["weighted_kappa"]["value"]
        sc = doc["self_consistency"][sec]
        metrics[f"self_consistency.{sec}.fleiss_kappa"] = sc["fleiss_kappa"]
        metrics[f"self_consistency.{sec}.all_agree"] = sc["all_agree"]
    tags = {f"raglab.metric_version.{k}": v for k, v in doc["versions"].items()}
    tags.update({"raglab.grader": doc["grader"], "raglab.labels_sha256": doc["labels"]["sha256"],
                 "raglab.labels": doc["labels"]["path"], "raglab.run_dir": str(run_dir),
                 "raglab.repeats": str(doc["repeats"])})
    ds = doc.get("dataset") or {}
    # the labels' dataset (name, case count, sha256), read back by find_calibrations
    tags.update({f"raglab.calibration.dataset.{k}": str(ds[k])
                 for k in ("name", "n_cases", "cases_sha256") if ds.get(k) is not None})
    params = flatten_config({"grader": resolved.get("grader", {}),
                             "dataset": resolved.get("dataset", {})})
    with tempfile.TemporaryDirectory() as tmp:
        j, md = Path(tmp) / "calibration.json", Path(tmp) / "calibration.md"
        atomic_write_json(j, doc)
        atomic_write_text(md, markdown(doc))
        return log_standalone_run(cfg.tracking.uri, EXPERIMENT,
                                  f"{doc['grader']}-{doc['versions']['faithfulness']}",
                                  params=params, metrics=metrics, tags=tags, artifacts=[j, md])
