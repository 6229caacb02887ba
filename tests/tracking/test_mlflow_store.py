"""MlflowRun against a real MLflow sqlite store in tmp_path, read back through MlflowClient."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from raglab.errors import UserError
from raglab.report.run_report import report_files
from raglab.tracking.keys import flatten_config, parse_slice_key
from raglab.tracking.mlflow_store import (
    CASES_HASH_TAG,
    MlflowRun,
    check_tracking,
    log_run_dir,
    normalize_uri,
    ui_command,
)
from tests.tracking.services import artifact_paths, expected_metrics, free_port, make_run_dir

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One sqlite store for the module (creating one takes seconds); tests use own experiments."""
    return f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"


def test_start_finish_logs_everything(tmp_path, store, monkeypatch):
    run_dir = make_run_dir(tmp_path / "outputs" / "run1")
    cfg_params = flatten_config({"dataset": {"name": "demo"}, "k": 5,
                                 "chunker": {"name": "fixed", "size": 128}})
    params = {**cfg_params, "metrics.cutoffs": "[1, 3]", "flag": True, "nothing": None,
              "grader.api_key": "sk-LEAK", "long": "x" * 7000, "k@1": 2}
    sha = "ab" * 32
    calls: list[tuple[int, int, int]] = []
    real_log_batch = MlflowClient.log_batch

    def counting_log_batch(self, run_id, metrics=(), params=(), tags=(), synchronous=None):
        calls.append((len(metrics), len(params), len(tags)))
        return real_log_batch(self, run_id, metrics=metrics, params=params, tags=tags,
                              synchronous=synchronous)

    monkeypatch.setattr(MlflowClient, "log_batch", counting_log_batch)
    run = MlflowRun.start(store, "raglab-test", "run1", params,
                          {"raglab.system": "reference", CASES_HASH_TAG: sha})
    client = MlflowClient(tracking_uri=store)
    assert client.get_run(run.run_id).info.status == "RUNNING"
    t0 = time.perf_counter()
    calls.clear()  # the params went in at the start
    run.finish(run_dir, report=report_files(run_dir))
    elapsed = time.perf_counter() - t0
    expected = expected_metrics(run_dir)
    assert len(expected) > 1500
    # batched, the run's final tags in the same requests: never one call per metric
    metric_calls = [c for c in calls if c[0]]
    assert sum(m for m, _, _ in metric_calls) == len(expected)
    assert len(metric_calls) == 2 and all(sum(c) == 1000 for c in metric_calls[:-1])
    assert metric_calls[0][2] > 0  # tags shared the first request
    print(f"\nfinish() with {len(expected)} metrics + artifacts + report: {elapsed:.2f} s")

    got = client.get_run(run.run_id)
    assert got.info.status == "FINISHED" and got.info.run_name == "run1"
    assert got.data.metrics.keys() == expected.keys()
    for k, v in expected.items():
        assert math.isclose(got.data.metrics[k], v), k
    # every slice key parses back to a tag key/value present in metrics.json
    slices = json.loads((run_dir / "metrics.json").read_text())["slices"]
    for key in (k for k in got.data.metrics if k.startswith("slice/")):
        tk, tv, _ = parse_slice_key(key)
        assert tv in slices[tk]
    assert "slice/intent/a_sb/n" in got.data.metrics
    assert "slice/source_skind/kb/final.ndcg_at_5" in got.data.metrics

    p = got.data.params
    assert p["dataset.name"] == "demo" and p["k"] == "5" and p["chunker.size"] == "128"
    assert p["flag"] == "true" and p["nothing"] == "null" and p["k_at_1"] == "2"
    assert len(p["long"]) == 6000
    assert not any("key" in k.lower() for k in p) and "sk-LEAK" not in json.dumps(p)

    t = got.data.tags
    assert t["raglab.system"] == "reference" and t[CASES_HASH_TAG] == sha
    for fam in ("retrieval", "faithfulness", "citations", "correctness", "relevance",
                "nuggets", "abstention"):
        assert t[f"raglab.metric_version.{fam}"] == f"{fam[:3]}0000"
    assert t["raglab.run_dir"] == str(run_dir)
    assert "mlflow.parentRunId" not in t

    assert artifact_paths(client, run.run_id) == {
        "config.yaml", "records.jsonl", "metrics.json", "quarantine.jsonl",
        "report/report.md", "report/report.html", "report/recall_at_k.png",
        "report/slices.png"}
    db_dir = Path(store[len("sqlite:///"):]).parent
    assert got.info.artifact_uri.startswith((db_dir / "mlartifacts" / "raglab-test").as_uri())

    (ds,) = got.inputs.dataset_inputs
    assert ds.dataset.name == "demo" and ds.dataset.digest == sha[:16]
    assert json.loads(ds.dataset.source)["uri"] == str(run_dir / "cases.jsonl")
    assert {t.key: t.value for t in ds.tags}[CASES_HASH_TAG] == sha

    # the store is readable from any directory (absolute artifact location)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    local = client.download_artifacts(run.run_id, "metrics.json", str(elsewhere))
    assert json.loads(Path(local).read_text()) == json.loads((run_dir / "metrics.json").read_text())


def test_a_sweep_parent_is_named_by_the_sweep_from_its_first_job(tmp_path, store):
    """Before: named after its directory (``12-00-00``) until the sweep's end, so a sweep
    still running, or stopped, did not say what it ran."""
    sweep = tmp_path / "multirun" / "12-00-00"
    job_dir = make_run_dir(sweep / "0", seed=0, n_intents=2)
    run = MlflowRun.start(store, "named", "k=1", {"k": 1}, {}, sweep_dir=str(sweep),
                          sweep_name="sweep k=1,2 grader=openai")
    run.finish(job_dir, report=report_files(job_dir))
    parent = MlflowClient(tracking_uri=store).get_run(run.parent_run_id)
    assert parent.info.run_name == "sweep k=1,2 grader=openai"


def test_sweep_children_share_one_parent(tmp_path, store):
    sweep = tmp_path / "multirun" / "2024-01-01" / "12-00-00"
    runs = []
    for i in range(2):
        job_dir = make_run_dir(sweep / str(i), seed=i, n_intents=2)
        run = MlflowRun.start(store, "sweeps", f"job{i}", {"k": i}, {}, sweep_dir=str(sweep))
        run.finish(job_dir, report=report_files(job_dir))
        runs.append(run)
    client = MlflowClient(tracking_uri=store)
    parent_ids = {client.get_run(r.run_id).data.tags["mlflow.parentRunId"] for r in runs}
    assert len(parent_ids) == 1
    (parent_id,) = parent_ids
    assert runs[0].parent_run_id == parent_id
    parent = client.get_run(parent_id)
    assert parent.info.run_name == "12-00-00"
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["raglab.sweep_dir"] == str(sweep)
    state = json.loads((sweep / ".mlflow_parent").read_text())
    assert state["parents"] == [{"uri": normalize_uri(store), "experiment_id":
                                 parent.info.experiment_id, "run_id": parent_id}]
    children = client.search_runs([parent.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent_id}'")
    assert {c.info.run_name for c in children} == {"job0", "job1"}
    assert all(c.data.params["k"] in ("0", "1") for c in children)


@pytest.mark.slow  # four processes importing mlflow: a sweep's parallel start
def test_parallel_processes_find_the_same_parent(tmp_path, store):
    """Jobs of a parallel launcher (separate processes) create exactly one parent."""
    sweep = tmp_path / "sweep"
    code = textwrap.dedent(f"""
        import sys
        from raglab.tracking.mlflow_store import MlflowRun
        run = MlflowRun.start({store!r}, "par", "job" + sys.argv[1], {{}}, {{}},
                              sweep_dir={str(sweep)!r})
        print(run.parent_run_id)
        run.kill()
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2])
             for i in range(3)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    parents = {o[0].strip().splitlines()[-1] for o in outs}
    assert len(parents) == 1
    client = MlflowClient(tracking_uri=store)
    exp = client.get_experiment_by_name("par")
    top = client.search_runs([exp.experiment_id], filter_string="tags.raglab.sweep_dir != ''")
    assert [r.info.run_id for r in top] == list(parents)


def test_kill_and_fail_set_status(tmp_path, store):
    client = MlflowClient(tracking_uri=store)
    run = MlflowRun.start(store, "status", "to-kill", {}, {})
    run.kill()
    assert client.get_run(run.run_id).info.status == "KILLED"
    run = MlflowRun.start(store, "status", "to-fail", {}, {})
    run.fail("grader unreachable:\n boom")
    got = client.get_run(run.run_id)
    assert got.info.status == "FAILED"
    assert got.data.tags["raglab.error"] == "grader unreachable: boom"


def test_log_run_dir_flattens_config(tmp_path, store):
    run_dir = make_run_dir(tmp_path / "r", n_intents=1)
    run_id = log_run_dir(run_dir, store, "later", tags={"raglab.origin": "log"})
    got = MlflowClient(tracking_uri=store).get_run(run_id)
    assert got.info.run_name == "synthetic-0" and got.info.status == "FINISHED"
    assert got.data.params["chunker.size"] == "128"
    assert got.data.params["metrics.cutoffs"] == "[1, 3, 5, 10, 20, 50, 100]"
    assert "grader.api_key" not in got.data.params and got.data.params["grader.model"] == "m"
    assert got.data.tags["raglab.origin"] == "log"
    assert got.data.metrics["final.evidence_recall_at_5"] >= 0


def test_log_run_dir_follows_the_runs_own_slice_metrics_setting(tmp_path, store):
    """Per slice, ``raglab log`` logs what the run itself would have: the headline metrics
    (a config without the setting, or ``tracking.slice_metrics: headline``), every metric
    with ``tracking.slice_metrics: all``; every overall metric either way."""
    import yaml

    from raglab.metrics.catalog import HEADLINE
    from raglab.tracking.keys import metric_key

    headline = {metric_key(m) for m in HEADLINE}
    client = MlflowClient(tracking_uri=store)
    for setting in (None, "headline", "all"):
        run_dir = make_run_dir(tmp_path / str(setting), n_intents=3)
        if setting is not None:
            cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
            cfg["tracking"] = {"name": "none", "slice_metrics": setting}
            (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
        logged = client.get_run(log_run_dir(run_dir, store, "slices")).data.metrics
        every = expected_metrics(run_dir)
        sliced = {k for k in every if k.startswith("slice/")}
        want = sliced if setting == "all" else \
            {k for k in sliced if parse_slice_key(k)[2] in headline | {"n"}}
        assert want and {k for k in logged if k.startswith("slice/")} == want, setting
        assert sliced - want or setting == "all"  # the synthetic run has non-headline ones
        assert {k for k in every if not k.startswith("slice/")} <= logged.keys()


def test_log_run_dir_refuses_unfinished_dir(tmp_path):
    (tmp_path / "r").mkdir()
    with pytest.raises(UserError, match="metrics.json: missing"):
        log_run_dir(tmp_path / "r", f"sqlite:///{tmp_path / 'mlflow.db'}", "later")
    assert not (tmp_path / "mlflow.db").exists()  # nothing created before the check


def test_check_tracking_unreachable_http_is_one_line_and_fast():
    port = free_port()  # nobody listens there
    t0 = time.perf_counter()
    with pytest.raises(UserError) as err:
        check_tracking(f"http://127.0.0.1:{port}")
    assert time.perf_counter() - t0 < 6
    msg = str(err.value)
    assert msg.startswith(f"MLflow tracking store unreachable at http://127.0.0.1:{port}: ")
    assert "\n" not in msg and len(msg) < 400
    assert "refused" in msg.lower()


def test_check_tracking_stores(tmp_path):
    check_tracking(f"sqlite:///{tmp_path / 'new.db'}")  # may be created: fine
    with pytest.raises(UserError, match="does not exist"):
        check_tracking(f"sqlite:///{tmp_path / 'missing' / 'mlflow.db'}")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(UserError, match="unreachable"):
        check_tracking(f"sqlite:///{junk}")
    port = free_port()
    with pytest.raises(UserError) as err:
        check_tracking(f"postgresql+psycopg://u:hunter2@127.0.0.1:{port}/db")
    assert "hunter2" not in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(UserError, match="unreachable"):
        check_tracking(f"postgresql://u@127.0.0.1:{port}/db")  # SQLAlchemy 2.1: psycopg 3
    with pytest.raises(UserError, match="file store"):
        check_tracking(str(tmp_path / "mlruns"))


KILLED_MID_WRITE = """
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size=1")  # changed pages reach the file before the commit
conn.execute("BEGIN")
conn.execute("INSERT INTO t SELECT randomblob(1000) FROM t")
os.kill(os.getpid(), signal.SIGKILL)  # a run killed while MLflow writes its store
"""


def test_check_tracking_accepts_a_store_whose_writer_was_killed(tmp_path):
    """A process killed mid-transaction leaves a hot journal, which the next connection
    that can write rolls back. The check used to open the store read-only, which cannot,
    and refused every later run: 'unreachable ...: attempt to write a readonly database'."""
    import sqlite3

    db = tmp_path / "mlflow.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x BLOB)")
    conn.executemany("INSERT INTO t VALUES (randomblob(1000))", [()] * 500)
    conn.commit()
    conn.close()
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_WRITE, str(db)])
    assert killed.returncode == -9
    assert (tmp_path / "mlflow.db-journal").stat().st_size > 0  # hot: left to roll back
    check_tracking(f"sqlite:///{db}")
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (500,)  # rolled back
    conn.close()


def test_ui_command_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert ui_command("sqlite:///mlflow.db") == \
        f"mlflow ui --backend-store-uri sqlite:///{tmp_path}/mlflow.db"
    assert ui_command(f"sqlite:///{tmp_path}/x.db").endswith(f"sqlite:///{tmp_path}/x.db")
    assert ui_command("http://127.0.0.1:5000/") == "http://127.0.0.1:5000"
    assert "***" in ui_command("postgresql+psycopg://u:pw@h/db")


def test_relative_sqlite_uri_lands_in_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = MlflowRun.start("sqlite:///rel.db", "rel", "r", {}, {})
    run.kill()
    assert (tmp_path / "rel.db").exists()
    exp = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/rel.db").get_experiment_by_name("rel")
    assert exp.artifact_location == (tmp_path / "mlartifacts" / "rel").as_uri()


def test_deleted_experiment_is_a_user_error(store):
    client = MlflowClient(tracking_uri=store)
    MlflowRun.start(store, "gone", "r", {}, {}).kill()
    client.delete_experiment(client.get_experiment_by_name("gone").experiment_id)
    with pytest.raises(UserError, match="'gone' is deleted"):
        MlflowRun.start(store, "gone", "r2", {}, {})


def test_a_run_killed_between_creating_its_mlflow_run_and_recording_it_is_continued(store):
    """The start token is recorded before the MLflow run is created and the run id right
    after, before anything else is logged: a process killed in between leaves a run that
    its resume finds by the token, not an orphan RUNNING next to a new one."""
    client = MlflowClient(tracking_uri=store)
    remembered: list[dict] = []

    def killed_after_create(identity: dict) -> None:
        remembered.append(identity)
        if "run_id" in identity:  # the process dies before run.json gets the run's id
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        MlflowRun.start(store, "token-resume", "r", {"k": 5}, {}, remember=killed_after_create)
    first = remembered[0]
    assert "run_id" not in first and first["token"].isalnum()
    exp = client.get_experiment_by_name("token-resume")
    [orphan] = client.search_runs([exp.experiment_id])
    assert orphan.data.tags["raglab.start_token"] == first["token"]

    again: list[dict] = []
    run = MlflowRun.start(store, "token-resume", "r", {"k": 5}, {}, resume=first,
                          remember=again.append)
    assert run.run_id == orphan.info.run_id  # the same run, continued
    assert again == [{**first, "run_id": orphan.info.run_id}]
    assert len(client.search_runs([exp.experiment_id])) == 1
    assert client.get_run(run.run_id).info.status == "RUNNING"
    # a token that names no run of this experiment starts a new run
    other = MlflowRun.start(store, "token-resume", "r2", {}, {},
                            resume={**first, "token": "0" * 32})
    assert other.run_id != run.run_id
