"""Issue 10 end to end, in real subprocesses: secrets, healing, one-line errors, the lock,
SIGTERM and a resumed MLflow run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import REPO, TINY_CASES, run_cli

BASE = ["metrics.cutoffs=[1,3,5]", "k=3", "candidate_depth=5", "progress=off"]


class SUT:
    """A local system under test: answers each case; fails (503) while ``down``; for case
    ``echo`` answers 500 with a page echoing every request header."""

    def __init__(self, echo: str | None = None):
        self.down = False
        self.echo = echo
        self.requests = 0
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests += 1
                if outer.down:
                    return self._send(503, b"down for maintenance")
                if body["case_id"] == outer.echo:
                    page = "".join(f"{k}: {v}\n" for k, v in self.headers.items())
                    return self._send(500, ("<pre>bad request\n" + page).encode())
                out = {"answer": "It takes 5 business days [1].",
                       "candidates": [{"doc_id": "kb/a"}], "context": [{"doc_id": "kb/a"}],
                       "citations": [{"sentence": 0, "context": [0]}]}
                self._send(200, json.dumps(out).encode())

            def _send(self, code, data):
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_port
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def _env(**extra):
    env = {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    env.update(extra)
    return env


def _all_bytes(root: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in root.rglob("*") if p.is_file()]


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
def test_secrets_appear_in_no_file_no_mlflow_field_and_no_stream(tiny, tmp_path):
    corpus, cases = tiny
    secrets = {"hdr-auth": "Bearer tok-hdr-3344", "x-auth": "xauth-5566",
               "authn": "authn-7788", "env": "env-tok-9911", "url_pw": "pw-url-1234",
               "url_key": "qk-url-5678", "api": "sk-ant-api-0000"}
    sut = SUT(echo="t-2")
    try:
        url = f"http://user:{secrets['url_pw']}@127.0.0.1:{sut.port}/?api_key={secrets['url_key']}"
        proc = run_cli("run", *BASE, f"hydra.run.dir={tmp_path / 'run'}",
                       f"cache_dir={tmp_path / 'cache'}", f"dataset.corpus={corpus}",
                       f"dataset.cases={cases}", "dataset.labels=null", "system=http",
                       f"system.url='{url}'", "system.retries=0", "grader=heuristic",
                       f"+system.headers.Authorization='{secrets['hdr-auth']}'",
                       f"+system.headers.X-Auth={secrets['x-auth']}",
                       f"+system.headers.Authentication={secrets['authn']}",
                       "+system.headers.X-Env=${oc.env:MY_TOKEN}",
                       f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
                       cwd=tmp_path, env=_env(MY_TOKEN=secrets["env"],
                                              ANTHROPIC_API_KEY=secrets["api"]))
    finally:
        sut.close()
    assert proc.returncode == 0, proc.stderr
    recs = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    echoed = next(r for r in recs if r["case_id"] == "t-2")["error"]
    assert "HTTP 500" in echoed and "***" in echoed  # the echo page, scrubbed
    values = [secrets[k] for k in secrets] + ["tok-hdr-3344"]
    for path, data in _all_bytes(tmp_path):
        if path.name in ("corpus.jsonl", "cases.jsonl"):
            continue
        for v in values:
            assert v.encode() not in data, f"{v} in {path}"
    for v in values:
        assert v not in proc.stdout and v not in proc.stderr, v
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("raglab")
    (run,) = client.search_runs([exp.experiment_id])
    fields = [run.info.run_name, *run.data.params.items(), *run.data.tags.items(),
              *run.data.metrics]
    text = json.dumps(fields)
    for v in values:
        assert v not in text, v
    assert run.data.params.get("system.headers.X-Auth") in (None, "***")


@pytest.mark.slow  # end to end (CLI runs): in the slow suite
def test_a_run_heals_after_an_outage_of_the_system_under_test(tiny, tmp_path):
    corpus, cases = tiny
    sut = SUT()
    args = ["run", *BASE, f"hydra.run.dir={tmp_path / 'run'}", f"cache_dir={tmp_path / 'cache'}",
            f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null",
            "system=http", f"system.url=http://127.0.0.1:{sut.port}/", "system.retries=0",
            "grader=none", "tracking=none"]
    try:
        sut.down = True
        down = run_cli(*args, cwd=tmp_path, env=_env())
        assert down.returncode == 1, down.stderr  # every case failed: exit 1
        assert "4 of 4 cases failed" in down.stderr and "Traceback" not in down.stderr
        sut.down = False
        before = sut.requests
        up = run_cli(*args, cwd=tmp_path, env=_env())
        assert up.returncode == 0, up.stderr
        assert sut.requests - before == 4  # the errored cases, asked again
        recs = [json.loads(x) for x in
                (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
        assert sorted(r["case_id"] for r in recs) == [c["id"] for c in TINY_CASES]
        assert all(r["error"] is None for r in recs)
        again = run_cli(*args, cwd=tmp_path, env=_env())  # nothing left to do
        assert again.returncode == 0 and sut.requests - before == 4
    finally:
        sut.close()


def _one_line(proc):
    err = [x for x in proc.stderr.splitlines() if x.strip()]
    assert "Traceback" not in proc.stderr and "Error executing job" not in proc.stderr, \
        proc.stderr
    assert err and err[-1].startswith("raglab: error: "), proc.stderr
    return err[-1]


def test_validate_input_mistakes_are_one_line(tiny, tmp_path):
    corpus, cases = tiny
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"id": "x", "question": "q", "tags": ' + '{"a": ' * 1000 + "1"
                    + "}" * 1000 + "}\n")
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for over, match in ((f"dataset.cases={deep}", "deep.jsonl:1"),
                        (f"dataset.cases={fifo}", "not a regular file"),
                        ("dataset.cases=''", "empty path")):
        proc = run_cli("validate", f"dataset.corpus={corpus}", over, "dataset.labels=null",
                       cwd=tmp_path, timeout=60)
        assert proc.returncode != 0
        assert match in _one_line(proc)


def test_run_environment_failures_are_one_line(tiny, tmp_path):
    corpus, cases = tiny
    (tmp_path / "boom.py").write_text("def make(opts):\n    raise RuntimeError('no GPU')\n")
    common = [*BASE, f"dataset.corpus={corpus}", f"dataset.cases={cases}",
              "dataset.labels=null", "tracking=none", "grader=none"]
    env = _env(PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO}")
    for extra, match in ((["hydra.run.dir=/sys/raglab-test/run", f"cache_dir={tmp_path}/c"],
                          "cannot write the run directory"),
                         ([f"hydra.run.dir={tmp_path}/r1", "cache_dir=/sys/raglab-cache"],
                          "cannot write the stage cache"),
                         ([f"hydra.run.dir={tmp_path}/r2", f"cache_dir={tmp_path}/c",
                           "system=python", "system._target_=boom.make"], "raised RuntimeError")):
        proc = run_cli("run", *common, *extra, cwd=tmp_path, env=env, timeout=120)
        assert proc.returncode != 0
        assert match in _one_line(proc)


def test_validate_in_an_unwritable_directory_is_one_line(tiny):
    corpus, cases = tiny
    proc = run_cli("validate", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                   "dataset.labels=null", cwd=Path("/sys"), timeout=60)
    assert proc.returncode == 2
    assert "cannot write quarantine.jsonl" in _one_line(proc)


SLOW_SYSTEM = """
import time
from raglab.data.schema import SystemOutput
class S:
    def answer(self, r):
        time.sleep({delay})
        return SystemOutput(case_id=r.case_id, answer='It takes 5 business days.',
                            candidates=[{{'doc_id': 'kb/a'}}], context=[{{'doc_id': 'kb/a'}}])
def make(opts):
    return S()
"""


def _slow_args(tmp_path, corpus, cases, delay=0.3):
    (tmp_path / "slow_sys.py").write_text(SLOW_SYSTEM.format(delay=delay))
    args = ["run", *BASE, f"hydra.run.dir={tmp_path / 'run'}", f"cache_dir={tmp_path / 'cache'}",
            f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null",
            "system=python", "system._target_=slow_sys.make", "concurrency=1",
            "grader=heuristic", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{REPO}"
    return args, env


def _wait_records(path: Path, n: int, proc, timeout=120):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if path.exists() and path.read_text().count("\n") >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read() if proc.stderr else "ended")
        time.sleep(0.05)
    raise AssertionError("no records")


@pytest.mark.slow  # (test_units.py checks the lock in process, in the default run)
def test_a_second_process_in_one_run_directory_exits_with_one_line(tiny, tmp_path):
    corpus, cases = tiny
    args, env = _slow_args(tmp_path, corpus, cases, delay=1.0)
    first = subprocess.Popen([sys.executable, "-m", "raglab.cli", *args], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_records(tmp_path / "run" / "records.jsonl", 1, first)
        second = subprocess.run([sys.executable, "-m", "raglab.cli", *args], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2
        assert "another raglab process" in _one_line(second)
        assert first.wait(timeout=120) == 0
    finally:
        if first.poll() is None:
            first.kill()
    recs = (tmp_path / "run" / "records.jsonl").read_text().splitlines()
    assert len(recs) == 4 and len({json.loads(x)["case_id"] for x in recs}) == 4


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_sigterm_is_ctrl_c_and_a_resume_continues_its_own_mlflow_run(tiny, tmp_path):
    corpus, cases = tiny
    args, env = _slow_args(tmp_path, corpus, cases)
    proc = subprocess.Popen([sys.executable, "-m", "raglab.cli", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_records(tmp_path / "run" / "records.jsonl", 1, proc)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("raglab")
    (killed,) = client.search_runs([exp.experiment_id])
    assert killed.info.status == "KILLED"
    resumed = subprocess.run([sys.executable, "-m", "raglab.cli", *args], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    runs = client.search_runs([exp.experiment_id])
    assert [r.info.run_id for r in runs] == [killed.info.run_id]  # no second, no orphan
    assert runs[0].info.status == "FINISHED"
    assert json.loads((tmp_path / "run" / "run.json").read_text())["mlflow"]["run_id"] == \
        killed.info.run_id
