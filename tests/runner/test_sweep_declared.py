"""A sweep declared in a config file (``hydra.sweeper.params`` of an experiment) is the same
sweep as one typed on the command line: every job counted, named, validated first, and
listed on the MLflow parent run (a real sqlite store)."""

import json
import re
import time

import pytest

from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl

# end-to-end runs against a real MLflow store: in the slow suite
pytestmark = pytest.mark.slow

TINY_STUDY = """# @package _global_
hydra:
  sweeper:
    params:
      chunker.size: 64,128
      k: 1,3
"""
BAD_STUDY = """# @package _global_
hydra:
  sweeper:
    params:
      k: 3,abc
"""


def _setup(d):
    write_jsonl(d / "corpus.jsonl", TINY_CORPUS)
    write_jsonl(d / "cases.jsonl", TINY_CASES)
    (d / "conf" / "experiment").mkdir(parents=True)
    (d / "conf" / "experiment" / "tiny.yaml").write_text(TINY_STUDY)
    (d / "conf" / "experiment" / "bad.yaml").write_text(BAD_STUDY)
    return [f"hydra.searchpath=[file://{d / 'conf'}]", f"dataset.corpus={d / 'corpus.jsonl'}",
            f"dataset.cases={d / 'cases.jsonl'}", "dataset.labels=null"]


@pytest.fixture(scope="module")
def declared(tmp_path_factory):
    d = tmp_path_factory.mktemp("declared")
    common = _setup(d)
    uri = f"sqlite:///{d / 'mlflow.db'}"
    res = run_cli("run", "-m", "experiment=tiny", *common, f"tracking.uri={uri}",
                  "hydra.sweep.dir=sw", cwd=d, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    return d, uri, res, common


def test_swept_keys_and_jobs_merge_declared_params_with_the_command_line():
    from raglab.runner.naming import job_overrides, swept_keys

    params = {"chunker.size": "64,128", "k": "1,3"}
    assert swept_keys(["experiment=tiny"], params) == ["chunker.size", "k"]
    jobs = job_overrides(["experiment=tiny"], True, params)
    assert jobs[1] == ["chunker.size=64", "k=3", "experiment=tiny"] and len(jobs) == 4
    # the command line wins, as in Hydra's basic sweeper: k no longer swept
    assert swept_keys(["k=5"], params) == ["chunker.size"]
    assert len(job_overrides(["k=5", "reranker=none,lexical"], True, params)) == 4
    assert swept_keys(["reranker=none,lexical"], params) == ["chunker.size", "k", "reranker"]


def test_a_config_declared_sweep_counts_names_and_lists_every_job(declared):
    d, uri, res, _ = declared
    lines = [ln for ln in res.stdout.splitlines() if re.match(r"job \d+/", ln)]
    assert [ln.split(" ", 2)[1] for ln in lines] == ["0/4", "1/4", "2/4", "3/4"]
    assert lines[1].startswith("job 1/4 size=64 k=3:")
    assert "sweep 'sweep size=64,128 × k=1,3 experiment=tiny " in res.stdout
    table = res.stdout.split("4 jobs in")[1].splitlines()
    assert table[1].split() == ["job", "0", "1", "2", "3"]
    html = (d / "sw" / "sweep.html").read_text()
    assert "<th>size</th><th>k</th>" in html.replace("\n", "")
    assert html.count("<tr>") == 5  # the header and one row per job
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("raglab")
    parents = [r for r in client.search_runs([exp.experiment_id])
               if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1
    parent = parents[0]
    assert parent.info.run_name.startswith("sweep size=64,128 × k=1,3 experiment=tiny ")
    assert parent.data.params == {"chunker.size": "64, 128", "k": "1, 3"}
    tags = parent.data.tags
    assert tags["raglab.sweep.jobs"] == "4"
    assert tags["raglab.sweep.job.1.values"] == "chunker.size=64,k=3"
    children = client.search_runs([exp.experiment_id],
                                  f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert {tags[f"raglab.sweep.job.{n}"] for n in range(4)} == {c.info.run_id
                                                                   for c in children}
    views = [json.loads(v) for k, v in exp.tags.items() if "raglab-sweep-" in k]
    state = json.loads(views[0]["state"])
    assert state["selectedColumns"][:2] == ["params.`chunker.size`", "params.`k`"]


def test_a_bad_value_in_a_declared_sweep_stops_before_any_job(tmp_path):
    common = _setup(tmp_path)
    res = run_cli("run", "-m", "experiment=bad", *common, "tracking=none",
                  "hydra.sweep.dir=sw", cwd=tmp_path)
    assert res.returncode == 2, (res.stdout, res.stderr)
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "job 1 (k=abc" in err[0] and "config k:" in err[0]
    assert "Traceback" not in res.stderr and "cases " not in res.stdout
    assert not (tmp_path / "sw").exists() and not (tmp_path / "outputs").exists()


def test_baseline_by_number_on_an_mlflow_parent_resolves_from_its_job_tags(declared):
    d, uri, _, _ = declared
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("raglab")
    parent = next(r for r in client.search_runs([exp.experiment_id])
                  if "mlflow.parentRunId" not in r.data.tags)
    pid, tags = parent.info.run_id, parent.data.tags
    res = run_cli("compare", pid, "--baseline", "0", "--uri", uri, "--out", "c0", cwd=d)
    assert res.returncode == 0, res.stderr
    data = json.loads((d / "c0" / "compare.json").read_text())
    assert data["baseline"] == "chunker.size=64,k=1"
    assert [j["mlflow_run_id"] for j in data["jobs"]] == [tags[f"raglab.sweep.job.{n}"]
                                                          for n in range(4)]
    res = run_cli("compare", pid, "--baseline", "k=3,chunker.size=128", "--uri", uri,
                  "--out", "c3", cwd=d)
    assert res.returncode == 0, res.stderr
    assert json.loads((d / "c3" / "compare.json").read_text())["baseline"] == \
        "chunker.size=128,k=3"
    # a job the tags do not name: one line, before any job's records are read
    client.set_terminated(tags["raglab.sweep.job.2"], status="KILLED")  # would refuse to load
    t0 = time.monotonic()
    res = run_cli("compare", pid, "--baseline", "9", "--uri", uri, "--out", "c9", cwd=d)
    assert res.returncode == 2
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "--baseline '9' names no job" in err[0]
    assert "0: chunker.size=64,k=1" in err[0] and "KILLED" not in err[0]
    assert time.monotonic() - t0 < 30 and not (d / "c9").exists()
    client.set_terminated(tags["raglab.sweep.job.2"], status="FINISHED")


def test_a_job_run_again_leaves_its_first_run_out_and_says_so(declared, tmp_path):
    """A job deleted and run again: the parent's tag names the new child run; the first
    one is still a child of the parent. compare PARENT --baseline 0 uses the tagged job,
    names the left-out run and compares the four jobs only."""
    d, uri, _, _ = declared
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("raglab")
    parent = next(r for r in client.search_runs([exp.experiment_id])
                  if "mlflow.parentRunId" not in r.data.tags)
    pid, tags = parent.info.run_id, parent.data.tags
    first = tags["raglab.sweep.job.0"]
    files = tmp_path / "job0"
    files.mkdir()
    for name in ("records.jsonl", "metrics.json", "config.yaml"):
        client.download_artifacts(first, name, str(files))
    again = client.create_run(exp.experiment_id, tags={"mlflow.parentRunId": pid})
    for name in ("records.jsonl", "metrics.json", "config.yaml"):
        client.log_artifact(again.info.run_id, str(files / name))
    client.set_terminated(again.info.run_id)
    client.set_tag(pid, "raglab.sweep.job.0", again.info.run_id)
    try:
        res = run_cli("compare", pid, "--baseline", "0", "--uri", uri, "--out", "again",
                      cwd=d)
        assert res.returncode == 0, res.stderr
        assert f"left out: {first}" in res.stderr and "superseded" in res.stderr
        data = json.loads((d / "again" / "compare.json").read_text())
        ids = [j["mlflow_run_id"] for j in data["jobs"]]
        assert len(ids) == 4 and ids[0] == again.info.run_id and first not in ids
        assert any("superseded" in w for w in data["warnings"])
    finally:
        client.set_tag(pid, "raglab.sweep.job.0", first)
        client.delete_run(again.info.run_id)
