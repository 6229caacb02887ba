"""Issue 24, defect 9 (and the smaller ones of defect 15): inputs that ended in a Python
traceback now end with one named line and the documented exit code (2: usage or input;
1: a store that failed). Real CLI runs in subprocesses."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl
from tests.reliability.harden import BASE, make_runs, one_line

GOOD = {"question": "How long do refunds take?", "timestamp": "2026-01-01T10:00:00Z",
        "answer": "Five business days [1].", "feedback": "down",
        "context": [{"doc_id": "kb/a", "text": "Refunds take 5 business days.", "score": 1.0}]}
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("runs"))


def _traffic(path: Path, *lines) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n"
                            for x in lines))
    return path


def _monitor(tmp_path: Path, traffic: Path, *over: str):
    return run_cli("monitor", str(traffic), "tracking=none", *over, cwd=tmp_path, timeout=120)


# -- compare and decide ---------------------------------------------------------------------

def test_compare_with_a_uri_mlflow_has_no_store_for(runs, tmp_path):
    base, _ = runs
    proc = run_cli("compare", str(base), "0123456789abcdef0123456789abcdef", "--uri",
                   "foo://bar", cwd=tmp_path, timeout=60)
    assert "--uri 'foo://bar': not an MLflow tracking URI" in one_line(proc)


def test_compare_set_refuses_python_tags(runs, tmp_path):
    base, cand = runs
    marker = tmp_path / "ran"
    proc = run_cli("compare", str(base), str(cand), "--set",
                   f"alpha=!!python/object/apply:os.system ['touch {marker}']",
                   cwd=tmp_path, timeout=60)
    assert "--set alpha: YAML refused" in one_line(proc)
    assert not marker.exists()


def test_decide_refuses_an_infinite_gate_bound(runs, tmp_path):
    base, cand = runs
    gates = tmp_path / "inf.yaml"
    gates.write_text("gates:\n  - {metric: latency_ms.total, rule: bound, max: .inf}\n")
    proc = run_cli("decide", str(base), str(cand), f"gates={gates}", "--study",
                   str(tmp_path), cwd=tmp_path, timeout=60)
    line = one_line(proc)
    assert str(gates) in line and "gates[0].max" in line and "finite" in line


def test_decide_with_a_study_folder_that_cannot_exist(runs, tmp_path):
    base, cand = runs
    proc = run_cli("decide", str(base), str(cand), "gates=default", "--study", "/dev/null/x",
                   cwd=tmp_path, timeout=60)
    line = one_line(proc)
    assert "/dev/null/x" in line and "study folder" in line


def test_decide_a_run_against_itself_says_so(runs, tmp_path):
    base, _ = runs
    proc = run_cli("decide", str(base), str(base) + "/", "gates=default", "--study",
                   str(tmp_path), cwd=tmp_path, timeout=60)
    assert "Traceback" not in proc.stderr
    assert "warning: BASELINE and CANDIDATE are the same run" in proc.stdout
    record = json.loads(next(tmp_path.glob("decision-*.json")).read_text())
    assert any("the same run" in w for w in record["warnings"])


# -- monitor ------------------------------------------------------------------------------

def test_monitor_counts_a_deep_line_as_bad(tmp_path):
    traffic = _traffic(tmp_path / "t.jsonl", GOOD, DEEP)
    proc = _monitor(tmp_path, traffic, f"hydra.run.dir={tmp_path}/m")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "t.jsonl:2: JSON nested too deep" in proc.stdout


@pytest.mark.parametrize("stamp", [
    "9999-12-31T23:59:59Z",
    pytest.param("9999-12-31T23:59:59-12:00", marks=pytest.mark.slow),
    pytest.param("0001-01-01T00:00:00+14:00", marks=pytest.mark.slow)])
def test_monitor_on_timestamps_at_the_ends_of_the_calendar(tmp_path, stamp):
    traffic = _traffic(tmp_path / "t.jsonl", dict(GOOD, timestamp=stamp))
    line = one_line(_monitor(tmp_path, traffic, f"hydra.run.dir={tmp_path}/m"))
    assert "no usable traffic line" in line and "out of range" in line
    # among good lines, it is one bad line
    traffic = _traffic(tmp_path / "t2.jsonl", GOOD, dict(GOOD, timestamp=stamp))
    proc = _monitor(tmp_path, traffic, f"hydra.run.dir={tmp_path}/m2")
    assert proc.returncode == 0, proc.stderr
    assert "bad traffic lines: 1" in proc.stdout


def test_monitor_window_is_bounded(tmp_path):
    traffic = _traffic(tmp_path / "t.jsonl", GOOD)
    line = one_line(_monitor(tmp_path, traffic, "monitor.window=999999999999999999w",
                             f"hydra.run.dir={tmp_path}/m"))
    assert "monitor.window" in line and "520w" in line
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("out", ["/proc/version/monitor", "/sys/raglab-test/monitor"])
def test_monitor_into_an_unwritable_folder(tmp_path, out):
    # /proc/version is a file and /sys refuses new entries, even to root; a read-only
    # folder (chmod 555) fails the same way for another user
    traffic = _traffic(tmp_path / "t.jsonl", GOOD)
    line = one_line(_monitor(tmp_path, traffic, f"hydra.run.dir={out}"))
    assert out.rsplit("/", 1)[0] in line and "cannot write the monitor run directory" in line


def test_monitor_bad_overrides_are_one_line_exit_2(tmp_path):
    traffic = _traffic(tmp_path / "t.jsonl", GOOD)
    line = one_line(_monitor(tmp_path, traffic, "monitor.foo=1", f"hydra.run.dir={tmp_path}/m"))
    assert "config monitor.foo: unknown key" in line
    line = one_line(_monitor(tmp_path, traffic, "monitor=nosuch",
                             f"hydra.run.dir={tmp_path}/m"))
    assert "config monitor=nosuch: unknown choice (valid: default)" in line


# -- cases from-traffic ---------------------------------------------------------------------

def test_cases_from_traffic_on_a_deep_line_and_an_overflowing_timestamp(tmp_path):
    traffic = _traffic(tmp_path / "t.jsonl", GOOD, DEEP,
                       dict(GOOD, timestamp="9999-12-31T23:59:59-12:00"))
    proc = run_cli("cases", "from-traffic", str(traffic), "--out", str(tmp_path / "d.jsonl"),
                   "--feedback", "down", cwd=tmp_path, timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "1 draft(s) from 1 picked line(s)" in proc.stdout
    assert "bad traffic lines: 2" in proc.stdout


@pytest.mark.parametrize("alerts", [[1, 2], {"x": 1}, [{"window_start": 5}], "not json"])
def test_cases_from_traffic_with_alerts_of_the_wrong_shape(tmp_path, alerts):
    traffic = _traffic(tmp_path / "t.jsonl", GOOD)
    path = tmp_path / "alerts.json"
    path.write_text(alerts if isinstance(alerts, str) else json.dumps(alerts))
    proc = run_cli("cases", "from-traffic", str(traffic), "--out", str(tmp_path / "d.jsonl"),
                   "--alerts", str(path), cwd=tmp_path, timeout=60)
    assert f"{path}: not an alerts.json of raglab monitor" in one_line(proc)


# -- validate, run --------------------------------------------------------------------------

def test_validate_a_file_that_fails_to_read(tmp_path):
    proc = run_cli("validate", "dataset.cases=/proc/self/mem", cwd=tmp_path, timeout=60)
    line = one_line(proc)
    assert "/proc/self/mem:1: cannot read cases file: Input/output error" in line


def _run(tmp_path: Path, *over: str, env: dict | None = None):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    args = [a for a in BASE if a != "tracking=none"]
    return run_cli("run", *args, "k=3", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                   *over, cwd=tmp_path, env=env, timeout=180)


def test_run_with_an_empty_experiment_name(tmp_path):
    line = one_line(_run(tmp_path, "tracking.experiment=", f"hydra.run.dir={tmp_path}/r"))
    assert "config tracking.experiment" in line
    assert not (tmp_path / "r").exists()


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
def test_run_against_an_mlflow_api_answering_500(tmp_path):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _answer(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            ok = self.path.startswith("/health")
            body = b"OK" if ok else b'{"error_code": "INTERNAL_ERROR", "message": "boom"}'
            self.send_response(200 if ok else 500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PATCH = do_DELETE = _answer

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    uri = f"http://127.0.0.1:{srv.server_port}"
    try:
        proc = _run(tmp_path, f"tracking.uri={uri}", "tracking.timeout_s=3",
                    f"hydra.run.dir={tmp_path}/r",
                    env={"NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"})
    finally:
        srv.shutdown()
        srv.server_close()
    line = one_line(proc, code=1)
    assert f"MLflow tracking store {uri} failed" in line and "unexpected" not in line


def test_a_citation_past_the_end_of_the_context_is_refused(tmp_path):
    rows = [{"case_id": c["id"], "candidates": [{"doc_id": "kb/a"}],
             "context": [{"doc_id": "kb/a"}], "answer": "Five business days [6].",
             "citations": [{"sentence": 0, "context": [5]}]} for c in TINY_CASES]
    replay = write_jsonl(tmp_path / "replay.jsonl", rows)
    line = one_line(_run(tmp_path, "tracking=none", "system=replay", f"system.path={replay}",
                         f"hydra.run.dir={tmp_path}/r"))
    assert f"{replay}:1 case t-1" in line and "cites passage 5" in line
