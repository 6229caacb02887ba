"""MlflowRun against a real tracking server backed by a throwaway PostgreSQL (slow)."""

from __future__ import annotations

import json
import math
import shutil
import time

import pytest

from raglab.report.run_report import report_files
from raglab.tracking.mlflow_store import MlflowRun, check_tracking
from tests.tracking.services import (
    artifact_paths,
    expected_metrics,
    make_run_dir,
    mlflow_server,
    postgres_server,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning"),
    pytest.mark.skipif(not (shutil.which("initdb") and shutil.which("pg_ctl")),
                       reason="PostgreSQL binaries (initdb, pg_ctl) not on PATH"),
]


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("services")
    with postgres_server(tmp) as pg_uri, mlflow_server(pg_uri, tmp) as http_uri:
        yield pg_uri, http_uri


def test_sweep_through_server_on_postgres(services, tmp_path):
    from mlflow.tracking import MlflowClient

    pg_uri, uri = services
    check_tracking(uri)
    check_tracking(pg_uri)
    sweep = tmp_path / "multirun" / "sweep-pg"
    children, timings = [], []
    for i in range(3):
        run_dir = make_run_dir(sweep / str(i), seed=i)
        run = MlflowRun.start(uri, "pg-sweep", f"job{i}", {"k": 3 + i, "chunker.size": 128},
                              {"raglab.job": str(i)}, sweep_dir=sweep)
        t0 = time.perf_counter()
        run.finish(run_dir, report=report_files(run_dir))
        timings.append(time.perf_counter() - t0)
        children.append((run, run_dir))
    print(f"\nfinish() through the server ({len(expected_metrics(run_dir))} metrics + artifacts): "
          + ", ".join(f"{t:.2f} s" for t in timings))

    client = MlflowClient(tracking_uri=uri)
    parent_id = children[0][0].parent_run_id
    parent = client.get_run(parent_id)
    assert parent.info.run_name == "sweep-pg" and parent.info.status == "FINISHED"
    assert parent.data.tags["raglab.sweep_dir"] == str(sweep)
    exp_id = parent.info.experiment_id
    found = client.search_runs([exp_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'",
                               max_results=100)
    assert sorted(r.info.run_name for r in found) == ["job0", "job1", "job2"]

    for i, (run, run_dir) in enumerate(children):
        got = client.get_run(run.run_id)
        assert got.info.status == "FINISHED"
        assert got.data.tags["mlflow.parentRunId"] == parent_id
        assert got.data.tags["raglab.job"] == str(i)
        assert got.data.params["k"] == str(3 + i)
        expected = expected_metrics(run_dir)
        assert got.data.metrics.keys() == expected.keys()
        assert all(math.isclose(got.data.metrics[k], v) for k, v in expected.items())
        assert got.data.tags["raglab.metric_version.retrieval"] == f"ret{i:04d}"
        assert got.info.artifact_uri.startswith("mlflow-artifacts:")
        assert {"config.yaml", "records.jsonl", "metrics.json", "quarantine.jsonl",
                "report/report.md", "report/recall_at_k.png"} <= artifact_paths(client, run.run_id)
        (ds,) = got.inputs.dataset_inputs
        assert ds.dataset.name == "demo"
        local = client.download_artifacts(run.run_id, "metrics.json", str(tmp_path))
        assert json.loads(open(local, encoding="utf-8").read())["n_cases"] == 14


def test_direct_postgres_store(services, tmp_path, monkeypatch):
    """The database URI itself works as a tracking store (SQLAlchemy with psycopg 3)."""
    from mlflow.tracking import MlflowClient

    pg_uri, _ = services
    monkeypatch.chdir(tmp_path)
    run_dir = make_run_dir(tmp_path / "run", n_intents=2)
    run = MlflowRun.start(pg_uri, "pg-direct", "direct", {"k": 5}, {})
    run.finish(run_dir, report=report_files(run_dir))
    got = MlflowClient(tracking_uri=pg_uri).get_run(run.run_id)
    assert got.info.status == "FINISHED"
    assert got.data.metrics.keys() == expected_metrics(run_dir).keys()
    assert got.info.artifact_uri.startswith((tmp_path / "mlartifacts" / "pg-direct").as_uri())


def test_a_runs_traces_through_the_server_read_back_with_mlflows_client(services, tmp_path,
                                                                         tiny):
    """A real ``raglab run`` tracked by ``mlflow server`` on PostgreSQL: every case a trace
    whose spans, expectations, feedback values and sources MLflow's own client reads back
    (the checks of the sqlite test, tests/tracking/test_traces.py)."""
    import mlflow

    from tests.conftest import run_cli
    from tests.tracking.test_traces import _args, check_traces

    _, uri = services
    args = [a for a in _args(tmp_path, tiny) if not a.startswith("tracking.uri=")]
    proc = run_cli(*args, f"tracking.uri={uri}", "tracking.experiment=pg-traces",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    mlflow.set_tracking_uri(uri)
    exp = mlflow.get_experiment_by_name("pg-traces")
    (run,) = mlflow.search_runs([exp.experiment_id], output_format="list")
    traces = mlflow.search_traces(locations=[exp.experiment_id], run_id=run.info.run_id,
                                  return_type="list")
    assert traces and all(t.data.spans for t in traces)
    check_traces(tmp_path / "run", tiny[1], run, traces)
