"""What the MLflow UI opens on: experiment layout, saved runs-table views, run descriptions,
the sweep's parent run, and finding a run directory already logged.

MLflow (3.15 and later) keeps a saved view of the runs table as one experiment tag,
``mlflow.sharedViewState.<id>``, whose value is ``{"name", "createdAt", "state"}`` with
``state`` the serialized table state (selected columns as ``params.`KEY``` /
``metrics.`KEY```, the search filter, the compare view's charts). The UI lists saved views
and opens one at ``#/experiments/<id>/runs?viewStateShareKey=<id>``. The experiment tag
``mlflow.experimentKind`` chooses the classic training-runs layout over the GenAI one.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from raglab.secrets import clip
from raglab.tracking.client import PARENT_FILE, _client
from raglab.tracking.keys import metric_key
from raglab.tracking.uris import normalize_uri, scheme_of

VIEW_TAG_PREFIX = "mlflow.sharedViewState."
VIEW_URL_PARAM = "viewStateShareKey"
KIND_TAG = "mlflow.experimentKind"
CLASSIC_KIND = "custom_model_development"
NOTE_TAG = "mlflow.note.content"
HEADLINE_VIEW_ID = "raglab-headline"
RUN_DIR_TAG = "raglab.run_dir"
CONFIG_HASH_TAG = "raglab.config_hash"
#: what the run logged: a hash of its records.jsonl and metrics.json (:func:`content_hash`)
CONTENT_HASH_TAG = "raglab.content_sha256"
DEFAULT_UI = "http://127.0.0.1:5000"
MAX_TAG_VALUE = 8000


def ui_base(uri: str) -> str:
    """The address of the UI for ``uri``: the server itself, else ``mlflow ui``'s default."""
    uri = normalize_uri(uri)
    return uri.rstrip("/") if scheme_of(uri) in ("http", "https") else DEFAULT_UI


def run_url(uri: str, experiment_id: str, run_id: str) -> str:
    return f"{ui_base(uri)}/#/experiments/{experiment_id}/runs/{run_id}"


def view_url(uri: str, experiment_id: str, view_id: str) -> str:
    return f"{ui_base(uri)}/#/experiments/{experiment_id}/runs?{VIEW_URL_PARAM}={view_id}"


def report_link(experiment_id: str, run_id: str) -> str:
    """A link, inside the UI, to the run's report.html in the artifact viewer."""
    return f"#/experiments/{experiment_id}/runs/{run_id}/artifacts/report/report.html"


# ---- saved views ---------------------------------------------------------------------------
def view_state(params: Sequence[str], metrics: Sequence[str], search_filter: str = "",
               section: str = "raglab headline") -> dict[str, Any]:
    """A runs-table state: the given params and metric columns (raglab names), and a
    compare view that opens on a parallel-coordinates chart of params -> metrics and one
    bar chart per metric, in a section of its own."""
    pkeys = [metric_key(p) for p in params]
    mkeys = [metric_key(m) for m in metrics]
    section_id = str(uuid.uuid5(uuid.NAMESPACE_URL, "raglab/" + section))
    charts: list[dict[str, Any]] = []
    if pkeys and mkeys:
        charts.append({"uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, "raglab/parallel")),
                       "type": "PARALLEL", "selectedParams": pkeys, "selectedMetrics": mkeys,
                       "showAllRuns": True, "runsCountToCompare": 100,
                       "metricSectionId": section_id, "deleted": False,
                       "isGenerated": False})
    for m in mkeys:
        charts.append({"uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, "raglab/bar/" + m)),
                       "type": "BAR", "metricKey": m, "runsCountToCompare": 100,
                       "metricSectionId": section_id, "deleted": False,
                       "isGenerated": False})
    columns = [f"params.`{p}`" for p in pkeys] + [f"metrics.`{m}`" for m in mkeys]
    return {
        "searchFilter": search_filter,
        "selectedColumns": columns,
        # the grid would sort each group's columns by name: keep the headline order
        "columnOrder": columns,
        "runsHiddenMode": "SHOW_ALL",
        "compareRunCharts": charts,
        "compareRunSections": [{"uuid": section_id, "name": section, "display": True,
                                "isReordered": False, "deleted": False, "isGenerated": False}],
        "isAccordionReordered": False,
        "hideEmptyCharts": True,
    }


def set_view(client, experiment_id: str, view_id: str, name: str,
             state: Mapping[str, Any]) -> None:
    value = json.dumps({"name": name, "createdAt": int(time.time() * 1000),
                        "state": json.dumps(state, separators=(",", ":"))},
                       separators=(",", ":"))
    if len(value) > MAX_TAG_VALUE:  # drop the per-metric bar charts rather than the view
        slim = dict(state, compareRunCharts=[c for c in state.get("compareRunCharts", [])
                                             if c.get("type") == "PARALLEL"])
        value = json.dumps({"name": name, "createdAt": int(time.time() * 1000),
                            "state": json.dumps(slim, separators=(",", ":"))},
                           separators=(",", ":"))
    client.set_experiment_tag(experiment_id, VIEW_TAG_PREFIX + view_id, value)


def prepare_experiment(client, experiment_id: str, headline: Sequence[str]) -> None:
    """Classic training-runs layout and a saved headline view, unless already set (a
    team's own choice is never overwritten)."""
    tags = client.get_experiment(experiment_id).tags or {}
    if KIND_TAG not in tags:
        client.set_experiment_tag(experiment_id, KIND_TAG, CLASSIC_KIND)
    if VIEW_TAG_PREFIX + HEADLINE_VIEW_ID not in tags:
        set_view(client, experiment_id, HEADLINE_VIEW_ID, "raglab: headline metrics",
                 view_state([], headline))


# ---- run directories already logged --------------------------------------------------------
def content_hash(run_dir: Path) -> str:
    """The SHA-256 of what logging a run directory reads: its ``records.jsonl`` and
    ``metrics.json`` (each file's length first, so no two contents can run together)."""
    import hashlib

    h = hashlib.sha256()
    for name in ("records.jsonl", "metrics.json"):
        path = Path(run_dir) / name
        size = path.stat().st_size if path.is_file() else -1
        h.update(f"{name}:{size}\n".encode())
        if size >= 0:
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()


def find_logged_runs(client, experiment_id: str, run_dir: Path,
                     config_hash: str | None) -> list[tuple[str, str | None]]:
    """``(run id, content hash or None)`` of the active runs that logged ``run_dir`` (same
    directory and configuration), oldest first."""
    run_dir_q = str(Path(run_dir).absolute()).replace("'", "\\'")
    query = f"tags.`{RUN_DIR_TAG}` = '{run_dir_q}'"
    if config_hash:
        query += f" and tags.`{CONFIG_HASH_TAG}` = '{config_hash}'"
    runs = client.search_runs([experiment_id], filter_string=query, max_results=1000,
                              order_by=["attributes.start_time ASC"])
    return [(r.info.run_id, r.data.tags.get(CONTENT_HASH_TAG)) for r in runs]


# ---- the sweep's parent run ----------------------------------------------------------------
def summarize_parent(client, parent_id: str, name: str, params: Mapping[str, str],
                     description: str, html_path: Path | None,
                     children: Mapping[int, str]) -> None:
    """Name, params, description, job-table artifact and child links of a sweep's parent."""
    from mlflow.entities import Param, RunTag

    have = client.get_run(parent_id).data.params
    new_params = [Param(metric_key(k), clip(str(v), 6000)) for k, v in params.items()
                  if metric_key(k) not in have]
    tags = [RunTag("mlflow.runName", name), RunTag(NOTE_TAG, clip(description, MAX_TAG_VALUE)),
            RunTag("raglab.sweep.jobs", str(len(children)))]
    tags += [RunTag(f"raglab.sweep.job.{num}", run_id) for num, run_id in sorted(children.items())]
    for i in range(0, max(len(new_params), len(tags)), 100):
        client.log_batch(parent_id, params=new_params[i:i + 100], tags=tags[i:i + 100])
    if html_path is not None and html_path.is_file():
        client.log_artifact(parent_id, str(html_path))


def children_of(client, experiment_id: str, parent_id: str) -> dict[str, str]:
    """``{run_dir: run_id}`` of the parent's children."""
    runs = client.search_runs([experiment_id],
                              filter_string=f"tags.`mlflow.parentRunId` = '{parent_id}'",
                              max_results=5000)
    return {r.data.tags.get(RUN_DIR_TAG, ""): r.info.run_id for r in runs}


# ---- entry points (raglab log, the sweep summary) ------------------------------------------
def logged_run(uri: str, experiment: str, run_dir: Path) -> tuple[str | None, str | None]:
    """Whether ``run_dir`` is logged as it is now: ``(run id, None)`` of the run that holds
    it (same directory, configuration and content: :func:`content_hash`); ``(None, why)``
    when an earlier run logged it and it must be logged again (its records or metrics
    changed since, or that run, logged by an older raglab, holds no content hash);
    ``(None, None)`` when no run logged it (a missing experiment has none)."""
    from raglab.data.io import read_run_metrics

    uri = normalize_uri(uri)
    client = _client(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None or exp.lifecycle_stage != "active":
        return None, None
    config_hash = read_run_metrics(Path(run_dir)).get("config_hash")
    runs = find_logged_runs(client, exp.experiment_id, Path(run_dir),
                            str(config_hash) if config_hash else None)
    now = content_hash(Path(run_dir))
    same = [run_id for run_id, logged in runs if logged == now]
    if same:
        return same[0], None
    if not runs:
        return None, None
    last, logged = runs[-1]
    if logged is None:
        return None, (f"MLflow run {last} logged it without a content hash (an older "
                      "raglab), so a change cannot be ruled out")
    return None, f"records.jsonl or metrics.json changed since MLflow run {last} logged it"


def summarize_sweep(uri: str, experiment: str, sweep_dir: Path, name: str,
                    params: Mapping[str, str], description: str, html_path: Path | None,
                    job_dirs: Mapping[int, Path], view_params: list[str],
                    view_metrics: list[str]) -> tuple[str, str, str] | None:
    """Fill the sweep's parent run (name, swept params, job table as description and
    artifact, a tag per child) and save a runs-table view of the sweep's jobs.
    Returns ``(parent run id, experiment id, view url)``, or None when no job was logged."""
    uri = normalize_uri(uri)
    client = _client(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return None
    try:
        state = json.loads((Path(sweep_dir) / PARENT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    parent_id = next((p["run_id"] for p in state.get("parents", []) if isinstance(p, dict)
                      and p.get("uri") == uri and p.get("experiment_id") == exp.experiment_id),
                     None)
    if parent_id is None:
        return None
    by_dir = children_of(client, exp.experiment_id, parent_id)
    children = {num: by_dir[str(Path(d).absolute())] for num, d in job_dirs.items()
                if str(Path(d).absolute()) in by_dir}
    summarize_parent(client, parent_id, name, params, description, html_path,
                               children)
    view_id = f"raglab-sweep-{parent_id[:12]}"
    set_view(client, exp.experiment_id, view_id, f"raglab: {name}",
                       view_state(view_params, view_metrics,
                                            f"tags.`mlflow.parentRunId` = '{parent_id}'"))
    return parent_id, exp.experiment_id, view_url(uri, exp.experiment_id, view_id)
