"""What a new user meets on a first run: sweeps that say which job is which, one-line config
errors with nothing left behind, readable outputs, `raglab log` twice, Ctrl-C in the
background, the ignore list."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys

import pytest

from tests.conftest import REPO, run_cli

HEADLINE_SWEPT = ("final.evidence_recall", "faithfulness", "vital_nugget_recall")


def _tiny(tiny):
    corpus, cases = tiny
    return [f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null"]


def _client(uri):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_a_sweep_says_which_job_is_which_and_summarises_itself(tmp_path, tiny):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep = tmp_path / "sweep"
    proc = run_cli("run", "-m", *_tiny(tiny), "chunker=fixed", "chunker.size=16,32",
                   "chunker.overlap=0", "k=1,2", "candidate_depth=5", f"tracking.uri={uri}",
                   f"hydra.sweep.dir={sweep}", f"cache_dir={tmp_path / 'c'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    job_lines = [x for x in out.splitlines() if re.match(r"job \d+/4 ", x)]
    assert [x.split(":")[0] for x in job_lines] == [
        "job 0/4 size=16 k=1", "job 1/4 size=16 k=2", "job 2/4 size=32 k=1",
        "job 3/4 size=32 k=2"]
    assert all("final.evidence_recall=" in x for x in job_lines)
    # one table at the end: the swept values as rows, then one row per headline metric
    # the sweep's own name: what it swept, then what else it set (at most 60 characters)
    table = out[out.index("sweep 'sweep size=16,32 × k=1,2 "):]
    assert re.search(r"^size\s+16\s+16\s+32\s+32$", table, re.M)
    assert re.search(r"^k\s+1\s+2\s+1\s+2$", table, re.M)
    assert re.search(r"^final\.evidence_recall ↑(\s+[0-9.]+){4}$", table, re.M)
    assert re.search(r"^acl_leak_rate ↓(\s+[0-9.]+){4}$", table, re.M)
    # no per-job "view it with" blocks: one parent, one mlflow ui command
    assert out.count("mlflow ui --backend-store-uri") == 1 and "view it with" not in out
    parent_id = re.search(r"MLflow parent run ([0-9a-f]{32})", out).group(1)
    assert "viewStateShareKey=raglab-sweep-" in out

    client = _client(uri)
    exp = client.get_experiment_by_name("raglab")
    parent = client.get_run(parent_id)
    assert parent.info.run_name.startswith("sweep size=16,32 × k=1,2 chunker=fixed")
    assert len(parent.info.run_name) <= 60 and parent.info.run_name in out
    assert parent.data.params["chunker.size"] == "16, 32" and parent.data.params["k"] == "1, 2"
    note = parent.data.tags["mlflow.note.content"]
    assert "| job | 0 | 1 | 2 | 3 |" in note and "| size | 16 | 16 | 32 | 32 |" in note
    assert "| k | 1 | 2 | 1 | 2 |" in note and "| final.evidence_recall ↑ |" in note
    # the job table, and every job compared with job 0 at the end of the sweep
    assert {a.path for a in client.list_artifacts(parent_id)} == {"sweep.html", "compare"}
    assert {a.path for a in client.list_artifacts(parent_id, "compare")} == \
        {"compare/compare.md", "compare/compare.html", "compare/compare.json"}
    children = client.search_runs([exp.experiment_id],
                                  f"tags.`mlflow.parentRunId` = '{parent_id}'")
    by_dir = {c.data.tags["raglab.run_dir"]: c for c in children}
    for num, name in enumerate(["size=16 k=1", "size=16 k=2", "size=32 k=1", "size=32 k=2"]):
        child = by_dir[str(sweep / str(num))]
        assert child.info.run_name == name
        assert parent.data.tags[f"raglab.sweep.job.{num}"] == child.info.run_id
        desc = child.data.tags["mlflow.note.content"]
        assert desc.startswith(f"**{name}**") and "| final.evidence_recall |" in desc
        assert re.search(r"^candidate\.evidence_recall \*\*[0-9.]+\*\* ↑ · ", desc, re.M)
        assert "`chunker.size` 256 → " in desc and "report.html" in desc
        assert "report/report.html" in {a.path for a in
                                        client.list_artifacts(child.info.run_id, "report")}
        md = (sweep / str(num) / "report.md").read_text()
        assert md.startswith(f"# raglab run report: {name}\n\n## Configuration")
    html = (sweep / "sweep.html").read_text()
    assert "<th>final.evidence_recall ↑</th>" in html and "<td>32</td>" in html
    # the classic runs layout and a saved view on the headline metrics and swept params
    tags = client.get_experiment(exp.experiment_id).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"
    view = json.loads(tags[f"mlflow.sharedViewState.raglab-sweep-{parent_id[:12]}"])
    state = json.loads(view["state"])
    assert state["selectedColumns"][:2] == ["params.`chunker.size`", "params.`k`"]
    assert "metrics.`final.evidence_recall`" in state["selectedColumns"]
    assert state["searchFilter"] == f"tags.`mlflow.parentRunId` = '{parent_id}'"
    parallel = state["compareRunCharts"][0]
    assert parallel["type"] == "PARALLEL" and parallel["selectedParams"] == ["chunker.size", "k"]


def test_a_bad_value_in_any_job_fails_before_any_job_runs(tmp_path, tiny):
    sweep = tmp_path / "sweep"
    proc = run_cli("run", "-m", *_tiny(tiny), "k=3,abc", "tracking=none",
                   f"hydra.sweep.dir={sweep}", f"cache_dir={tmp_path / 'c'}", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("raglab: error: job 1 (")
    assert "config k:" in proc.stderr and "valid integer" in proc.stderr
    assert not sweep.exists() and not (tmp_path / "c").exists()  # job 0 never ran


@pytest.mark.parametrize("override,expected", [
    ("chunker=fixd", "config chunker=fixd: unknown choice (valid: fixed, recursive, sentence)"),
    ("chunker.sise=3", "config chunker.sise: unknown key (valid: name, size, overlap)"),
])
def test_config_errors_are_one_line_and_leave_no_run_directory(tmp_path, override, expected):
    out = tmp_path / "run"
    proc = run_cli("run", override, "tracking=none", f"hydra.run.dir={out}", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == f"raglab: error: {expected}\n"
    assert "+chunker" not in proc.stderr
    assert not out.exists()
    default = run_cli("run", override, "tracking=none", cwd=tmp_path)  # Hydra's outputs/DATE/TIME
    assert default.returncode == 2 and not (tmp_path / "outputs").exists()


def test_outputs_are_readable_by_the_team(tmp_path, tiny):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "raglab.cli", "run", *_tiny(tiny), "tracking=none",
         f"hydra.run.dir={out}", f"cache_dir={tmp_path / 'c'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        preexec_fn=lambda: os.umask(0o022))
    assert proc.returncode == 0, proc.stderr
    for name in ("config.yaml", "metrics.json", "quarantine.jsonl", "records.jsonl",
                 "report.md", "report.html"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o644, name


def test_atomic_writes_follow_the_umask(tmp_path):
    from raglab.data.io import atomic_write_text

    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
        atomic_write_text(tmp_path / "b.bin", b"\x00")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "b.bin").stat().st_mode) == 0o640
    assert (tmp_path / "b.bin").read_bytes() == b"\x00"


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_raglab_log_twice_finds_the_first_run(tmp_path, tiny):
    out = tmp_path / "run"
    proc = run_cli("run", *_tiny(tiny), "tracking=none", "k=2", f"hydra.run.dir={out}",
                   f"cache_dir={tmp_path / 'c'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    first = run_cli("log", str(out), "--uri", uri, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    run_id = re.search(r"as MLflow run ([0-9a-f]{32})", first.stdout).group(1)
    second = run_cli("log", str(out), "--uri", uri, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert f"already logged as MLflow run {run_id}" in second.stdout
    client = _client(uri)
    runs = client.search_runs([client.get_experiment_by_name("raglab").experiment_id])
    assert [r.info.run_id for r in runs] == [run_id]
    assert "`k` 5 → 2" in runs[0].data.tags["mlflow.note.content"]


@pytest.mark.slow  # end-to-end runs: in the slow suite
def test_raglab_log_logs_a_changed_run_directory_again(tmp_path, tiny):
    """Issue 37, defect 12: after records.jsonl changed (a case dropped, then run again
    by a resume), ``raglab log`` said "already logged". It compares a hash of what it logs
    (records.jsonl and metrics.json) and logs the directory again, saying why."""
    out = tmp_path / "run"
    args = ["run", *_tiny(tiny), "tracking=none", "k=2", f"hydra.run.dir={out}",
            f"cache_dir={tmp_path / 'c'}"]
    assert run_cli(*args, cwd=tmp_path).returncode == 0
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    first = run_cli("log", str(out), "--uri", uri, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    old_id = re.search(r"as MLflow run ([0-9a-f]{32})", first.stdout).group(1)
    lines = (out / "records.jsonl").read_text().splitlines(keepends=True)
    (out / "records.jsonl").write_text("".join(lines[1:]))  # the first case is run again
    resumed = run_cli(*args, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    again = run_cli("log", str(out), "--uri", uri, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "already logged" not in again.stdout
    new_id = re.search(r"as MLflow run ([0-9a-f]{32})", again.stdout).group(1)
    assert new_id != old_id
    assert (f"logged again: records.jsonl or metrics.json changed since MLflow run {old_id} "
            "logged it") in again.stdout
    third = run_cli("log", str(out), "--uri", uri, cwd=tmp_path)
    assert f"already logged as MLflow run {new_id}" in third.stdout
    client = _client(uri)
    runs = client.search_runs([client.get_experiment_by_name("raglab").experiment_id])
    assert sorted(r.info.run_id for r in runs) == sorted([old_id, new_id])


def test_log_help_reads_as_text():
    proc = run_cli("log", "--help", cwd=REPO)
    assert proc.returncode == 0 and "``" not in proc.stdout
    assert "log a finished run directory to MLflow later" in proc.stdout


def test_every_output_is_in_the_manual_and_the_ignore_list():
    ignore = (REPO / ".gitignore").read_text().split()
    readme = (REPO / "docs" / "configs.md").read_text()
    for name in ("mlartifacts/", "mlflow.db.lock", "multirun/", "mlflow.db", "outputs/"):
        assert any(line.strip("/") == name.strip("/") for line in ignore), name
        assert f"`{name}`" in readme, name


@pytest.mark.slow
def test_the_ctrl_c_test_passes_in_a_suite_started_with_sigint_ignored(tmp_path):
    """A suite started in the background (``pytest &``) inherits SIGINT ignored."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "slow",
         "--basetemp", str(tmp_path / "t"),
         "tests/runner/test_tracking_cli.py::test_ctrl_c_marks_the_run_killed_and_keeps_records"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_run_help_lists_every_group_and_the_composed_config(tmp_path):
    """`raglab run --help` shows the config groups (not the schema nodes) and the composed
    configuration with the overrides given; a bad override is one line, exit 2."""
    proc = run_cli("run", "--help", "k=3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("raglab run is powered by Hydra.")
    assert "chunker: fixed, recursive, sentence\n" in out and "schema" not in out
    assert "\nk: 3\n" in out and "\nchunker:\n  name: recursive\n" in out
    secret = "sk-ant-api03-" + "Q" * 24  # a header value given on the command line
    shown = run_cli("run", "--help", "system=http", "system.url=http://127.0.0.1:9",
                    f"+system.headers.Authorization=Bearer {secret}", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "Authorization: ***" in shown.stdout and secret not in shown.stdout
    bad = run_cli("run", "--help", "chunker=nope", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip() == ("raglab: error: config chunker=nope: unknown choice "
                                  "(valid: fixed, recursive, sentence)")
