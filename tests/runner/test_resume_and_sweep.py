"""Resumable runs (kill -9 at any point), stage reuse across a sweep, interrupted runs."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import run_cli


def _strip_timing(rec):
    rec = json.loads(json.dumps(rec))
    if rec.get("output"):
        rec["output"].pop("latency_ms", None)
    rec["metrics"] = {k: v for k, v in rec["metrics"].items() if not k.startswith("latency_ms.")}
    return rec


def _records(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.slow
def test_killed_run_resumes_to_identical_records(tmp_path):
    args = ["run", "tracking=none", "progress=plain", "concurrency=1"]
    # reference: an uninterrupted run with its own cache
    ref = tmp_path / "ref"
    proc = run_cli(*args, f"hydra.run.dir={ref}", f"cache_dir={tmp_path / 'c1'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # the same run, killed with SIGKILL once some records are written, then resumed
    out = tmp_path / "killed"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    cmd = [sys.executable, "-m", "raglab.cli", *args, f"hydra.run.dir={out}",
           f"cache_dir={tmp_path / 'c2'}"]
    p = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    recs = out / "records.jsonl"
    while time.monotonic() < deadline:
        if recs.exists() and recs.stat().st_size > 0 and len(recs.read_bytes().splitlines()) >= 20:
            break
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    n_before = len(recs.read_bytes().splitlines())
    assert 0 < n_before < 228, "kill came too late to test a resume"
    # simulate a torn last line as a kill mid-write would leave it
    with open(recs, "ab") as fh:
        fh.write(b'{"case_id": "torn", "tags": {')
    proc = run_cli(*args, f"hydra.run.dir={out}", f"cache_dir={tmp_path / 'c2'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    a = [_strip_timing(r) for r in _records(ref / "records.jsonl")]
    b = [_strip_timing(r) for r in _records(recs)]
    assert [r["case_id"] for r in b] == [r["case_id"] for r in a]  # none lost, none twice
    assert a == b
    m = json.loads((out / "metrics.json").read_text())
    assert m["n_cases"] == 228
    # the resumed process re-graded nothing that was already recorded
    assert m["work"]["retrievals"] <= 228 - n_before + 1


@pytest.mark.slow  # end to end (CLI runs): in the slow suite
def test_changed_config_in_same_run_dir_is_refused(tmp_path):
    out = tmp_path / "r"
    base = ["run", "tracking=none", "grader=none", f"hydra.run.dir={out}",
            f"cache_dir={tmp_path / 'c'}"]
    assert run_cli(*base, cwd=tmp_path).returncode == 0
    proc = run_cli(*base, "k=3", cwd=tmp_path)
    assert proc.returncode == 2 and "different configuration" in proc.stderr  # a usage error
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_sweep_reuses_stages(tmp_path, demo_subset):
    def sweep_into(sweep):
        proc = run_cli("run", "-m", *demo_subset, "tracking=none", "grader=heuristic",
                       "chunker=fixed", "chunker.size=64,128,256", "chunker.overlap=0",
                       "k=3,5,10", f"hydra.sweep.dir={sweep}", f"cache_dir={tmp_path / 'c'}",
                       cwd=tmp_path, timeout=900)
        assert proc.returncode == 0, proc.stderr

    sweep = tmp_path / "sweep"
    sweep_into(sweep)
    works = [json.loads((sweep / str(i) / "metrics.json").read_text())["work"] for i in range(9)]
    assert sum(w["index_builds"] for w in works) == 3
    # retrieval depends on the index, not on k: 3 chunk sizes x 228 questions at most
    assert sum(w["retrievals"] for w in works) <= 3 * 30
    # a second identical sweep reuses everything
    sweep2 = tmp_path / "sweep2"
    sweep_into(sweep2)
    for i in range(9):
        w = json.loads((sweep2 / str(i) / "metrics.json").read_text())["work"]
        assert w["index_builds"] == w["retrievals"] == w["generations"] == w["grader_calls"] == 0
        assert w["grader_cache_hits"] > 0


@pytest.mark.slow
def test_parallel_sweep_with_joblib_builds_each_index_once(tmp_path, demo_subset):
    sweep = tmp_path / "jl"
    proc = run_cli("run", "-m", *demo_subset, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                   "tracking=none", "grader=none", "k=3,5,8", f"hydra.sweep.dir={sweep}",
                   f"cache_dir={tmp_path / 'c'}", cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    works = [json.loads((sweep / str(i) / "metrics.json").read_text())["work"] for i in range(3)]
    assert sum(w["index_builds"] for w in works) == 1
    # jobs ran in other processes: the table at the end is read back from the sweep folder
    lines = proc.stdout.splitlines()
    assert sorted(x.split(":")[0] for x in lines if x.startswith("job ") and ":" in x) == [
        "job 0/3 k=3", "job 1/3 k=5", "job 2/3 k=8"]
    assert any(x.split() == ["k", "3", "5", "8"] for x in lines)
    assert (sweep / "sweep.html").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("launcher", [[], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]])
def test_a_sweep_whose_jobs_exceed_max_error_rate_exits_1_with_any_launcher(tmp_path,
                                                                           demo_subset,
                                                                           launcher):
    """Every case of both jobs fails (nothing listens on the system's port): the jobs run in
    this process or in joblib's, and the sweep exits 1 naming both job directories."""
    sweep = tmp_path / "sw"
    proc = run_cli("run", "-m", *demo_subset, *launcher, "system=http",
                   "system.url=http://127.0.0.1:9/rag", "system.retries=0",
                   "system.connect_timeout_s=0.5", "tracking=none", "grader=none", "k=3,5",
                   f"hydra.sweep.dir={sweep}", f"cache_dir={tmp_path / 'c'}", cwd=tmp_path,
                   timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("raglab: error: 2 job(s) exceeded max_error_rate: "), last
    assert str((sweep / "0").resolve()) in last and str((sweep / "1").resolve()) in last
