"""Results logged where people look: a comparison's confirmatory rows on the candidate's
MLflow run, a sweep comparison on the sweep's parent run, a decision as tags and a record,
and the job tags that let ``raglab compare PARENT --baseline N`` find a job without loading
any run.

Keys (MLflow names made legal by :func:`raglab.tracking.keys.metric_key`):

- ``compare.<metric>.delta``, ``.ci_low``, ``.ci_high``, ``.p_adjusted``: the candidate
  against its baseline, each headline metric overall (the confirmatory family);
- on a sweep's parent, ``sweep.<job>.<metric>.delta``, ``.ci_low``, ``.ci_high`` for each job
  against the baseline job (``<job>`` is the job's number; the baseline job's own are 0);
- on a sweep's parent, the sweep-wide family (every pair of jobs, per headline metric):
  ``family.<a>.<b>.<metric>.p_adjusted`` (job numbers, ``a`` before ``b``) and
  ``family.<job>.<metric>.best_group`` (1 for a job in the metric's best group, else 0);
- ``ppi.<metric>.estimate``, ``.ci_low``, ``.ci_high``, ``.judge_mean``, ``.n_labelled``,
  ``.n_effective``, ``.lam`` on a run whose answers people labelled (``raglab label``), and
  ``slice/TAG_KEY/TAG_VALUE/ppi.<metric>.<figure>`` per slice; tag ``raglab.labels``;
- tags ``raglab.compared_with`` (the baseline), ``raglab.sweep.baseline`` (the baseline
  job's number), ``raglab.decision`` (GO, NO-GO or INCONCLUSIVE) and
  ``raglab.decision.gates``.

MLflow keeps a metric's history and has no call that deletes a value: a figure is logged only
when it is new or changed, so re-running a comparison adds nothing, and a changed one becomes
the value the UI shows (the previous one stays in that metric's history only).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from raglab.secrets import clip
from raglab.tracking.keys import metric_key

#: the figures of one confirmatory row, in this order
ROW_FIGURES = ("delta", "ci_low", "ci_high", "p_adjusted")
SWEEP_FIGURES = ("delta", "ci_low", "ci_high", "p_adjusted")
#: the baseline job's own figures: no difference from itself
BASELINE_FIGURES = {"delta": 0.0, "ci_low": 0.0, "ci_high": 0.0, "p_adjusted": 1.0}
JOB_TAG = "raglab.sweep.job."
JOB_VALUES_SUFFIX = ".values"
DECISION_TAG = "raglab.decision"
GATES_TAG = "raglab.decision.gates"
BASELINE_JOB_TAG = "raglab.sweep.baseline"


def comparison_key(metric: str, figure: str) -> str:
    """``compare.final.evidence_recall.delta``."""
    return f"compare.{metric_key(metric)}.{figure}"


def sweep_key(job: str, metric: str, figure: str) -> str:
    """``sweep.3.final.evidence_recall.delta``: job 3 against the sweep's baseline job."""
    return f"sweep.{metric_key(job)}.{metric_key(metric)}.{figure}"


def row_figures(rows: Iterable[Mapping], figures: tuple[str, ...] = ROW_FIGURES
                ) -> dict[str, dict[str, float]]:
    """``{metric: {figure: value}}`` of comparison rows (the finite values only)."""
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        vals = {f: float(r[f]) for f in figures
                if isinstance(r.get(f), int | float) and not isinstance(r.get(f), bool)
                and math.isfinite(float(r[f]))}
        out[str(r["metric"])] = vals
    return out


def confirmatory_rows(rows: Iterable[Mapping]) -> list[Mapping]:
    """The confirmatory family of a comparison: rows marked ``family: confirmatory``, or,
    for rows without a family, each headline metric overall."""
    from raglab.metrics.catalog import HEADLINE

    out = []
    for r in rows:
        if r.get("slice") is not None:
            continue
        if r.get("family") == "confirmatory" or ("family" not in r and r["metric"] in HEADLINE):
            out.append(r)
    return out


def _log_changed(client, run_id: str, values: Mapping[str, float],
                 tags: Mapping[str, str] | None = None) -> int:
    """Log the metrics whose latest value differs (or that are new) and set the tags; the
    number of metrics logged."""
    from mlflow.entities import Metric, RunTag

    have = client.get_run(run_id).data.metrics
    now = int(time.time() * 1000)
    metrics = [Metric(k, v, now, 0) for k, v in values.items() if have.get(k) != v]
    tag_list = [RunTag(k, clip(str(v), 5000)) for k, v in (tags or {}).items()]
    for i in range(0, max(len(metrics), len(tag_list), 1), 1000):
        client.log_batch(run_id, metrics=metrics[i:i + 1000], tags=tag_list[i:i + 100])
    return len(metrics)


def human_scale_figures(ppi: Mapping | None) -> dict[str, float]:
    """``compare.ppi.METRIC.{delta,ci_low,ci_high}``: each labelled metric's
    prediction-powered difference overall (compare.json's ``ppi`` section), where there is
    one."""
    out: dict[str, float] = {}
    for metric, entry in ((ppi or {}).get("metrics") or {}).items():
        delta = ((entry or {}).get("overall") or {}).get("delta")
        if not isinstance(delta, Mapping):
            continue
        for figure, field in (("delta", "estimate"), ("ci_low", "ci_low"),
                              ("ci_high", "ci_high")):
            v = delta.get(field)
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
                out[f"compare.ppi.{metric_key(metric)}.{figure}"] = float(v)
    return out


def log_comparison(run_id: str, uri: str, rows: Iterable[Mapping], files: list[Path],
                   tags: Mapping[str, str] | None = None, ppi: Mapping | None = None) -> int:
    """The confirmatory ``rows`` (metric overall: delta, interval, adjusted p) and the
    human-scale differences of ``ppi`` (compare.json's section) as metrics of the
    candidate's run, ``files`` under ``compare/``; the number of figures logged."""
    from raglab.tracking.store_setup import existing_client

    client = existing_client(uri)
    values = {comparison_key(m, f): v for m, figs in row_figures(rows).items()
              for f, v in figs.items()}
    values.update(human_scale_figures(ppi))
    n = _log_changed(client, run_id, values, tags)
    for path in files:
        client.log_artifact(run_id, str(path), artifact_path="compare")
    return n


def log_sweep_comparison(parent_id: str, uri: str, baseline_job: str,
                         cells: Mapping[str, Mapping[str, Mapping]], files: list[Path]) -> int:
    """Each job's headline deltas, intervals and adjusted p-values against the baseline job
    as metrics of the sweep's parent (``cells``: metric -> job number -> row), the heat map
    (``files``) under ``compare/``; the number of figures logged. The baseline job's own
    figures are those of no difference from itself (0, and a p-value of 1), so a comparison
    against another baseline replaces every figure an earlier one logged instead of leaving
    the new baseline's old ones behind."""
    from raglab.tracking.store_setup import existing_client

    client = existing_client(uri)
    values: dict[str, float] = {}
    for metric, jobs in cells.items():
        compared = False
        for job, row in jobs.items():
            figs = row_figures([dict(row, metric=metric)], SWEEP_FIGURES)[metric]
            values.update({sweep_key(job, metric, f): v for f, v in figs.items()})
            compared = compared or bool(figs)
        if compared:
            values.update({sweep_key(baseline_job, metric, f): v
                           for f, v in BASELINE_FIGURES.items()})
    n = _log_changed(client, parent_id, values, {BASELINE_JOB_TAG: baseline_job})
    for path in files:
        client.log_artifact(parent_id, str(path), artifact_path="compare")
    return n


def family_key(*parts: str) -> str:
    """``family.0.3.final.evidence_recall.p_adjusted``, ``family.3.faithfulness.best_group``:
    each part made legal for MLflow (job numbers, then the metric, then the figure)."""
    *jobs, metric, figure = parts
    return ".".join(["family", *(metric_key(j) for j in jobs), metric_key(metric), figure])


def log_sweep_family(parent_id: str, uri: str, numbers: Mapping[str, str],
                     family: Mapping) -> int:
    """The sweep-wide family's adjusted p-value of each pair of jobs and each job's place
    in each metric's best group as metrics of the sweep's parent (``numbers``: job name ->
    job number); the number of figures logged."""
    from raglab.tracking.store_setup import existing_client

    values: dict[str, float] = {}
    for pair in family.get("pairs", []):
        values[family_key(numbers[pair["a"]], numbers[pair["b"]], pair["metric"],
                          "p_adjusted")] = float(pair["p_adjusted"])
    for metric, group in family.get("best_group", {}).items():
        for name, num in numbers.items():
            values[family_key(num, metric, "best_group")] = 1.0 if name in group else 0.0
    if not values:
        return 0
    return _log_changed(existing_client(uri), parent_id, values)


def log_decision(run_id: str, uri: str, decision: str, gates: str, files: list[Path],
                 baseline: str) -> None:
    """Tag the candidate's run with the decision and its gate set; the record (md, HTML,
    JSON) under ``decision/``."""
    from raglab.tracking.store_setup import existing_client

    client = existing_client(uri)
    _log_changed(client, run_id, {}, {DECISION_TAG: decision, GATES_TAG: gates,
                                      "raglab.decision.baseline": baseline})
    for path in files:
        client.log_artifact(run_id, str(path), artifact_path="decision")


# ---- a sweep's jobs on its parent run ------------------------------------------------------
def set_job_values(uri: str, parent_id: str, values: Mapping[int, str]) -> None:
    """``raglab.sweep.job.N.values`` = ``chunker.size=64,k=3`` for each job of the sweep
    (``raglab.sweep.job.N`` holds the job's run id)."""
    from mlflow.entities import RunTag

    from raglab.tracking.client import _client
    from raglab.tracking.uris import normalize_uri

    tags = [RunTag(f"{JOB_TAG}{num}{JOB_VALUES_SUFFIX}", clip(text, 5000))
            for num, text in sorted(values.items())]
    client = _client(normalize_uri(uri))
    for i in range(0, len(tags), 100):
        client.log_batch(parent_id, tags=tags[i:i + 100])


def sweep_jobs(parent_id: str, uri: str) -> list[dict]:
    """The jobs a sweep's parent run lists in its tags, by number: ``[{"num", "run_id",
    "values"}]`` (empty for a parent logged before raglab wrote job tags); UserError when
    the store or the run does not exist. Reads the parent run only."""
    from mlflow.exceptions import MlflowException

    from raglab.errors import UserError
    from raglab.tracking.store_setup import existing_client

    client = existing_client(uri)
    try:
        tags = client.get_run(parent_id).data.tags
    except MlflowException:
        raise UserError(f"unknown MLflow run id {parent_id!r}") from None
    jobs = []
    for key, run_id in tags.items():
        num = key[len(JOB_TAG):]
        if key.startswith(JOB_TAG) and num.isdigit():
            jobs.append({"num": int(num), "run_id": run_id,
                         "values": tags.get(f"{JOB_TAG}{num}{JOB_VALUES_SUFFIX}")})
    return sorted(jobs, key=lambda j: j["num"])


# ---- the sweep's address: its jobs listed, on the chart view --------------------------------
#: the runs page's query parameter that picks its table or chart view (MLflow 3.17)
COMPARE_MODE_PARAM = "compareRunsMode"


def open_on_jobs(uri: str, experiment_id: str, url: str, metric: str | None,
                 higher_is_better: bool = True) -> str:
    """Make the sweep's saved view (the ``viewStateShareKey`` of ``url``) list its jobs
    sorted by ``metric``, best first, and return the address that opens it on the chart
    view (``compareRunsMode=CHART``).

    MLflow 3.17 nests child runs under a collapsed parent while the table is sorted by start
    time (its default) and drops ``runsExpanded`` from a shared view, so a sweep's view sorted
    by start time opens on one collapsed row and empty charts; sorted by a metric, the table
    lists every job (the view's filter keeps the sweep's own) and the charts show them."""
    import json

    from raglab.tracking.client import _client
    from raglab.tracking.mlflow_ui import VIEW_TAG_PREFIX, VIEW_URL_PARAM, set_view
    from raglab.tracking.uris import normalize_uri

    view_id = url.split(f"{VIEW_URL_PARAM}=", 1)[1].split("&", 1)[0]
    client = _client(normalize_uri(uri))
    value = (client.get_experiment(experiment_id).tags or {}).get(VIEW_TAG_PREFIX + view_id)
    if value is None:
        return url
    saved = json.loads(value)
    state = json.loads(saved["state"])
    if metric is not None:
        state.update(orderByKey=f"metrics.`{metric_key(metric)}`",
                     orderByAsc=not higher_is_better)
    set_view(client, experiment_id, view_id, saved["name"], state)
    return f"{url}&{COMPARE_MODE_PARAM}=CHART"


def ppi_values(section: Mapping) -> dict[str, float]:
    """The MLflow metrics of ``metrics.json``'s ``ppi`` section
    (:func:`raglab.tracking.keys.ppi_metrics`)."""
    from raglab.tracking.keys import ppi_metrics

    return ppi_metrics(section)


def log_ppi(run_id: str, uri: str, section: Mapping, files: list[Path]) -> int:
    """The run's prediction-powered estimates (``metrics.json``'s ``ppi`` section) as
    metrics of its MLflow run, and its rewritten ``metrics.json`` and report as artifacts
    (replacing the ones logged when it ran); the number of figures logged."""
    from raglab.tracking.store_setup import existing_client

    client = existing_client(uri)
    n = _log_changed(client, run_id, ppi_values(section),
                     {"raglab.labels": ",".join(sorted(section.get("metrics") or {}))})
    for path in files:
        client.log_artifact(run_id, str(path),
                            artifact_path=None if path.name == "metrics.json" else "report")
    return n
