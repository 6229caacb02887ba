"""Runs and sweeps logged to real MLflow stores through the CLI."""

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import default_sigint, run_cli
from tests.tracking.services import free_port, mlflow_server, postgres_server


def _client(uri):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _expected(run_dir):
    """Every non-null metric of a run directory under its MLflow key (per slice: the
    headline ones, or all with the run's tracking.slice_metrics=all)."""
    import yaml

    from raglab.metrics.catalog import HEADLINE
    from raglab.tracking.keys import metric_key, slice_metric_key

    m = json.loads((run_dir / "metrics.json").read_text())
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    every = cfg["tracking"].get("slice_metrics") == "all"
    exp = {metric_key(k): v for k, v in m["overall"].items() if v is not None}
    for tk, vals in m["slices"].items():
        for tv, ms in vals.items():
            for k, v in ms.items():
                if v is not None and (every or k == "n" or k in HEADLINE):
                    key = slice_metric_key(tk, tv, k if k == "n" else metric_key(k))
                    exp[key] = v
    return exp


def _check_sweep(uri, sweep_dir, n_jobs):
    client = _client(uri)
    exp = client.get_experiment_by_name("raglab")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    parents = {r.info.run_id for r in runs if not r.data.tags.get("mlflow.parentRunId")}
    assert len(children) == n_jobs and len(parents) == 1
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == parents
    by_dir = {c.data.tags["raglab.run_dir"]: c for c in children}
    for i in range(n_jobs):
        run_dir = sweep_dir / str(i)
        child = by_dir[str(run_dir)]
        assert child.info.status == "FINISHED"
        logged = child.data.metrics
        for key, value in _expected(run_dir).items():
            assert key in logged, key
            assert math.isclose(logged[key], value, rel_tol=1e-9, abs_tol=1e-12), key
        assert any(k.startswith("slice/intent/") for k in logged)
        assert child.data.tags["raglab.metric_version.faithfulness"]
        assert child.data.params["k"] in {"3", "5", "10"}
        arts = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"config.yaml", "records.jsonl", "metrics.json"} <= arts
    return children


@pytest.mark.slow
def test_sweep_logs_a_parent_and_a_child_per_job_with_every_slice_metric(tmp_path, demo_subset):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep = tmp_path / "sweep"
    proc = run_cli("run", "-m", *demo_subset, "chunker=fixed", "chunker.size=64,128,256",
                   "chunker.overlap=0", "k=3,5,10", f"tracking.uri={uri}",
                   f"hydra.sweep.dir={sweep}", f"cache_dir={tmp_path / 'c'}", cwd=tmp_path,
                   timeout=900)
    assert proc.returncode == 0, proc.stderr
    _check_sweep(uri, sweep, 9)
    works = [json.loads((sweep / str(i) / "metrics.json").read_text())["work"] for i in range(9)]
    assert sum(w["index_builds"] for w in works) == 3
    assert "mlflow ui --backend-store-uri sqlite:///" in proc.stdout


def test_unreachable_mlflow_fails_before_any_work(tmp_path):
    out = tmp_path / "r"
    proc = run_cli("run", f"tracking.uri=http://127.0.0.1:{free_port()}", f"hydra.run.dir={out}",
                   cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "MLflow tracking store unreachable" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (out / "records.jsonl").exists()


@pytest.mark.slow
def test_ctrl_c_marks_the_run_killed_and_keeps_records(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = tmp_path / "r"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    p = subprocess.Popen([sys.executable, "-m", "raglab.cli", "run", "concurrency=1",
                          f"tracking.uri={uri}", f"hydra.run.dir={out}",
                          f"cache_dir={tmp_path / 'c'}"],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=default_sigint)
    recs = out / "records.jsonl"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not (recs.exists() and recs.stat().st_size > 2000):
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "Traceback" not in err and "resume" in err
    lines = recs.read_text().splitlines()
    assert lines and all(json.loads(x)["case_id"] for x in lines)
    runs = _client(uri).search_runs([_client(uri).get_experiment_by_name("raglab").experiment_id])
    assert [r.info.status for r in runs] == ["KILLED"]


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
def test_raglab_log_logs_a_finished_run_dir_later(tmp_path, demo_subset):
    out = tmp_path / "r"
    proc = run_cli("run", *demo_subset, "tracking=none", f"hydra.run.dir={out}",
                   f"cache_dir={tmp_path / 'c'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    uri = f"sqlite:///{tmp_path / 'later.db'}"
    proc = run_cli("log", str(out), "--uri", uri, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    runs = _client(uri).search_runs([_client(uri).get_experiment_by_name("raglab").experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    logged = runs[0].data.metrics
    for key in _expected(out):
        assert key in logged, key
    # per slice, the run's own tracking.slice_metrics (headline by default), as a run logs
    # (and each slice's diagnosis counts)
    assert {k for k in logged if k.startswith("slice/") and "/diagnosis." not in k} == \
        {k for k in _expected(out) if k.startswith("slice/")}
    bad = run_cli("log", str(tmp_path), "--uri", uri, cwd=tmp_path)
    assert bad.returncode == 2 and "not a finished run directory" in bad.stderr  # input error
    missing = run_cli("log", str(tmp_path / "no-such-dir"), "--uri", uri, cwd=tmp_path)
    assert missing.returncode == 2 and "not a finished run directory" in missing.stderr


@pytest.mark.slow
def test_sweep_against_a_postgresql_backed_mlflow_server(tmp_path, demo_subset):
    with postgres_server(tmp_path) as pg, mlflow_server(pg, tmp_path) as http_uri:
        sweep = tmp_path / "sweep"
        proc = run_cli("run", "-m", *demo_subset, "chunker=fixed", "chunker.size=64,128",
                       "chunker.overlap=0", "k=3,5", f"tracking.uri={http_uri}",
                       f"hydra.sweep.dir={sweep}", f"cache_dir={tmp_path / 'c'}",
                       cwd=tmp_path, timeout=1200)
        assert proc.returncode == 0, proc.stderr
        _check_sweep(http_uri, sweep, 4)


@pytest.mark.slow
def test_sweep_on_a_local_ray_instance(tmp_path, demo_subset):
    pytest.importorskip("hydra_plugins.hydra_ray_launcher")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep = tmp_path / "sweep"
    proc = run_cli("run", "-m", *demo_subset, "hydra/launcher=ray",
                   "+hydra.launcher.ray.init.num_cpus=2", "k=3,5", f"tracking.uri={uri}",
                   f"hydra.sweep.dir={sweep}", f"cache_dir={tmp_path / 'c'}", cwd=tmp_path,
                   timeout=1200)
    assert proc.returncode == 0, proc.stderr
    _check_sweep(uri, sweep, 2)
