"""Issue 10, slow: 20+ SIGKILLs at random points of the run's progress (start-up, judging,
writing records, logging the summary) with resumes (records, paid calls and MLflow runs
checked), and an MLflow server that dies mid-run."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import REPO
from tests.graders.fake_anthropic import TEST_KEY, FakeAnthropic, fake_model
from tests.graders.test_run_claude import _subset
from tests.tracking.services import free_port

pytestmark = pytest.mark.slow


def _env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
               PYTHONPATH=str(REPO))
    env.update(extra or {})
    return env


def _stable(line: str) -> dict:
    rec = json.loads(line)
    if rec.get("output"):
        rec["output"].pop("latency_ms", None)
    # latency is measured, and a cost depends on which prompts the API had cached when the
    # call was made (a cache write costs more than a read): neither is a lost or changed result
    rec["metrics"] = {k: v for k, v in rec["metrics"].items()
                      if not k.startswith("latency") and "cost_usd" not in k}
    rec.pop("grading_cost_usd", None)
    # what the model client spent since the previous record: which process wrote which
    # record differs between a killed run and an uninterrupted one (test_usage_resume.py
    # checks the sum over a resumed run)
    rec.pop("model_usage", None)
    # the judge calls that served the case: the same calls, but their latency, cost and
    # cache split are measured, and a resumed run finds some in raglab's cache
    rec["grading_calls"] = [(c.get("model"), c.get("family"), c.get("purpose"))
                            for c in rec.get("grading_calls") or ()]
    return rec


def test_twenty_sigkills_lose_nothing_repeat_no_paid_call_and_leave_no_orphan(tmp_path):
    cases = _subset(tmp_path, n_answerable=24, n_unanswerable=8)  # about 80 judge calls
    n_cases = len(cases.read_text().splitlines())
    slots = 2  # judge requests in flight at once
    rng = random.Random(10)
    with FakeAnthropic(handler=fake_model) as srv:
        env = _env({"ANTHROPIC_BASE_URL": srv.url, "ANTHROPIC_API_KEY": TEST_KEY})

        def cmd(run_dir, cache):
            return [sys.executable, "-m", "raglab.cli", "run", "grader=claude",
                    f"hydra.run.dir={tmp_path / run_dir}", f"cache_dir={tmp_path / cache}",
                    f"dataset.cases={cases}", "progress=off", "concurrency=2",
                    f"grader.concurrency={slots}",
                    f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}"]

        ref = subprocess.run(cmd("ref", "cache-ref"), env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=600)
        assert ref.returncode == 0, ref.stderr[-2000:]
        paid_ref = len(srv.calls("/v1/messages"))
        srv.reset()
        records = tmp_path / "killed/records.jsonl"

        def attempt(ready) -> bool:
            """One resumed run, SIGKILLed once ``ready()`` holds (False: it ended first)."""
            proc = subprocess.Popen(cmd("killed", "cache-k"), env=env, cwd=tmp_path,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if not _wait_for(proc, ready):
                return False
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            return True

        # the kills are paced by the run's progress, not the clock, so a fast machine meets
        # as many as a slow one: twenty while it judges (a third in start-up, before the
        # first answer; the rest after one to three answers, others still in flight) ...
        kills = 0
        while kills < 20 and attempt(_answers(srv, rng)):
            kills += 1
        before_records = _lines(records)
        # ... then some as it writes its records, one to four records apart, the last of
        # them as soon as the last record is written (while the summary and the MLflow run
        # are): only a process that wrote that record can be killed there
        tail = False
        while not tail and attempt(_more_lines(records, rng.randint(1, 4), most=n_cases)):
            kills += 1
            tail = _lines(records) >= n_cases
        final = subprocess.run(cmd("killed", "cache-k"), env=env, cwd=tmp_path,
                               capture_output=True, text=True, timeout=600)
        assert final.returncode == 0, final.stderr[-2000:]
        print(f"records after the twenty kills while judging: {before_records} of {n_cases}")
        assert before_records < n_cases - 1, "no kill came while records were written"
        assert tail, "the run ended before the kill after its last record"
        # each paid judgment asked once: the killed runs together paid what one run paid,
        # plus at most what was lost at each kill: the requests in flight (never answered)
        # and the one answer the kill may have met before it was cached
        paid = len(srv.calls("/v1/messages"))
        print(f"kills={kills} paid_killed={paid} paid_uninterrupted={paid_ref}")
        assert paid <= paid_ref + kills * (slots + 1), (paid, paid_ref)
    ref_lines = (tmp_path / "ref/records.jsonl").read_text().splitlines()
    ref_recs = sorted((_stable(x) for x in ref_lines), key=lambda r: r["case_id"])
    got = [_stable(x) for x in (tmp_path / "killed/records.jsonl").read_text().splitlines()]
    assert len(got) == len({r["case_id"] for r in got}) == len(ref_recs)  # none lost or twice
    diffs = [d for a, b in zip(sorted(got, key=lambda r: r["case_id"]), ref_recs)
             for d in _diff(a, b)]
    assert not diffs, diffs[:5]  # none different
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("raglab")
    runs = client.search_runs([exp.experiment_id])
    assert all(r.info.status == "FINISHED" for r in runs), [r.info.status for r in runs]
    assert len(runs) == 2  # the reference run and the killed run's one MLflow run


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def _wait_for(proc: subprocess.Popen, ready) -> bool:
    """Polls ``ready()`` until it holds; False if the run ended first."""
    while proc.poll() is None:
        if ready():
            return True
        time.sleep(0.002)
    return False


def _more_lines(path: Path, n: int, most: int):
    """A kill point: after n more lines in ``path`` than it has now (at most ``most``)."""
    want = min(_lines(path) + n, most)
    return lambda: _lines(path) >= want


def _answers(srv: FakeAnthropic, rng: random.Random):
    """A kill point: after n judge answers in this attempt, n drawn from 0 to 3 (0: in
    start-up, at the first answer or a random moment before it)."""
    n = rng.choice((0, 1, 2, 3, 0, 1))
    deadline = time.monotonic() + rng.uniform(0.3, 2.5)
    start = len(srv.calls("/v1/messages"))

    def ready() -> bool:
        answered = sum(1 for c in srv.calls("/v1/messages")[start:] if c.get("t_end"))
        return answered >= max(n, 1) or (n == 0 and time.monotonic() >= deadline)
    return ready


def _diff(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            yield from _diff(a.get(k), b.get(k), f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _diff(x, y, f"{path}.{i}")
    elif a != b:
        yield f"{path}: {str(a)[:80]!r} != {str(b)[:80]!r}"


SLOW_SYSTEM = """
import time
from raglab.data.schema import SystemOutput
class S:
    def answer(self, r):
        time.sleep(0.5)
        return SystemOutput(case_id=r.case_id, answer='It takes 5 business days.',
                            candidates=[{'doc_id': 'kb/a'}], context=[{'doc_id': 'kb/a'}])
def make(opts):
    return S()
"""


def _server(tmp_path: Path, backend: str):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend, "--host",
         "127.0.0.1", "--port", str(port), "--artifacts-destination",
         str(tmp_path / "artifacts"), "--workers", "1"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, env=dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true"))
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            if requests.get(f"{uri}/health", timeout=2).status_code == 200:
                return proc, uri
        except requests.RequestException:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            _kill(proc)
            raise AssertionError("mlflow server did not start")
        time.sleep(0.5)


def _kill(proc) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def test_a_dying_mlflow_server_costs_a_bounded_wait_and_raglab_log_finishes(tiny, tmp_path):
    corpus, cases = tiny
    (tmp_path / "slow_sys.py").write_text(SLOW_SYSTEM)
    backend = f"sqlite:///{tmp_path / 'backend.db'}"
    server, uri = _server(tmp_path, backend)
    env = _env({"PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"})
    try:
        run = subprocess.Popen(
            [sys.executable, "-m", "raglab.cli", "run", f"hydra.run.dir={tmp_path / 'run'}",
             f"cache_dir={tmp_path / 'cache'}", f"dataset.corpus={corpus}",
             f"dataset.cases={cases}", "dataset.labels=null", "system=python",
             "system._target_=slow_sys.make", "concurrency=1", "progress=off",
             f"tracking.uri={uri}"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        records = tmp_path / "run" / "records.jsonl"
        while not (records.exists() and records.read_text().count("\n") >= 1):
            assert run.poll() is None, run.stderr.read()
            time.sleep(0.05)
        _kill(server)  # the store dies mid-run
        t0 = time.monotonic()
        _, err = run.communicate(timeout=300)
        waited = time.monotonic() - t0
    finally:
        _kill(server)
    assert run.returncode == 1, err
    assert waited < 60, waited
    lines = [x for x in err.splitlines() if x.strip()]
    assert "Traceback" not in err and lines[-1].startswith("raglab: error: MLflow failed")
    assert "is complete" in lines[-1] and "raglab log" in lines[-1]
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["n_cases"] == 4
    # the store is back: raglab log finishes the run the directory started (no orphan)
    server, uri = _server(tmp_path, backend)
    try:
        log = subprocess.run([sys.executable, "-m", "raglab.cli", "log", str(tmp_path / "run"),
                              "--uri", uri], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=300)
        assert log.returncode == 0, log.stderr
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name("raglab")
        runs = client.search_runs([exp.experiment_id])
        assert len(runs) == 1 and runs[0].info.status == "FINISHED"
        assert runs[0].data.metrics["n_cases"] == 4
    finally:
        _kill(server)


def test_a_full_disk_stops_the_run_with_one_line_and_the_resume_heals(tmp_path, demo_subset):
    """A real tmpfs too small for the run directory (where mounting is allowed), grown
    afterwards: the run stops with one line, keeps complete lines only, and resumes."""
    full = tmp_path / "full"
    full.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(full)],
                             capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (test_units.py simulates ENOSPC instead)")
    try:
        args = ["run", "tracking=none", "grader=heuristic", "progress=off",
                f"hydra.run.dir={full / 'run'}", f"cache_dir={tmp_path / 'cache'}",
                *demo_subset]
        env = _env()
        first = subprocess.run([sys.executable, "-m", "raglab.cli", *args], cwd=tmp_path,
                               env=env, capture_output=True, text=True, timeout=600)
        assert first.returncode == 2, first.stderr[-2000:]
        lines = [x for x in first.stderr.splitlines() if x.strip()]
        assert "Traceback" not in first.stderr
        assert lines[-1].startswith("raglab: error: ") and "No space left" in lines[-1]
        records = full / "run" / "records.jsonl"
        kept = records.read_text().splitlines() if records.exists() else []
        assert all(json.loads(x)["error"] is None for x in kept)
        assert not records.exists() or records.read_text().endswith("\n") or not kept
        subprocess.run(["mount", "-o", "remount,size=20m", str(full)], check=True)
        second = subprocess.run([sys.executable, "-m", "raglab.cli", *args], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=600)
        assert second.returncode == 0, second.stderr[-2000:]
        got = [json.loads(x) for x in records.read_text().splitlines()]
        assert len(got) == len({r["case_id"] for r in got}) == 30
        assert all(r["error"] is None for r in got)
    finally:
        subprocess.run(["umount", "-l", str(full)], capture_output=True)
