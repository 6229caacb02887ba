"""Issue 10 item 8: the HTTP adapter's retries and deadlines, against a local server."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from raglab.systems.base import SystemRequest
from raglab.systems.http import HttpSystem, HttpSystemCfg, HttpSystemError

OK = {"answer": "fine", "candidates": [{"doc_id": "kb/a", "score": 1.5}]}


class Script:
    """What the server does for each successive request (the last step repeats)."""

    def __init__(self, *steps):
        self.steps = list(steps)
        self.times: list[float] = []

    def next(self):
        self.times.append(time.monotonic())
        return self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]


@pytest.fixture
def server():
    state = {}

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            step = state["script"].next()
            kind = step[0]
            if kind == "json":
                body = (step[1] if isinstance(step[1], str) else json.dumps(step[1])).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif kind == "status":
                body = b'{"error": "busy"}'
                self.send_response(step[1])
                for k, v in (step[2] if len(step) > 2 else {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif kind == "truncated":
                body = json.dumps(OK).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body) + 50))
                self.end_headers()
                self.wfile.write(body[:10])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
            elif kind == "drip":
                body = json.dumps(OK).encode() + b" " * 200
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    for b in body:
                        self.wfile.write(bytes([b]))
                        self.wfile.flush()
                        time.sleep(step[1])
                except OSError:
                    pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()

    def make(script, **cfg):
        state["script"] = script
        c = HttpSystemCfg(name="http", url=f"http://127.0.0.1:{srv.server_port}/",
                          backoff_s=0.01, **cfg)
        return HttpSystem(c)

    yield make
    srv.shutdown()
    srv.server_close()


REQ = SystemRequest("c1", "q?", {}, None, {})


def test_429_is_retried_and_retry_after_honoured(server):
    script = Script(("status", 429, {"Retry-After": "1"}), ("json", OK))
    out = server(script).answer(REQ)
    assert out.answer == "fine" and len(script.times) == 2
    assert script.times[1] - script.times[0] >= 0.95


def test_retry_after_is_bounded(server):
    script = Script(("status", 503, {"Retry-After": "3600"}), ("json", OK))
    t0 = time.monotonic()
    assert server(script, max_retry_after_s=0.2).answer(REQ).answer == "fine"
    assert time.monotonic() - t0 < 5


def test_a_truncated_body_is_retried(server):
    script = Script(("truncated",), ("json", OK))
    assert server(script).answer(REQ).answer == "fine"
    assert len(script.times) == 2


def test_read_timeout_bounds_the_whole_request_not_each_read(server):
    script = Script(("drip", 0.1))  # a byte every 0.1 s: ~25 s for the whole body
    t0 = time.monotonic()
    with pytest.raises(HttpSystemError, match="read_timeout_s bounds the whole request"):
        server(script, read_timeout_s=1.0, retries=0).answer(REQ)
    assert time.monotonic() - t0 < 4


def test_a_run_deadline_fails_the_remaining_cases_at_once(server):
    sut = server(Script(("status", 503)), run_deadline_s=0.5, retries=50)
    t0 = time.monotonic()
    with pytest.raises(HttpSystemError, match="run deadline"):
        sut.answer(REQ)
    with pytest.raises(HttpSystemError, match="run deadline"):
        sut.answer(REQ)
    assert time.monotonic() - t0 < 3


@pytest.mark.parametrize("body, match", [
    ('{"answer": "a", "latency_ms": {"x": NaN}}', "non-finite"),
    ('{"answer": "a", "usage": {"t": Infinity}}', "non-finite"),
    ('{"answer": "\\ud800"}', "surrogate"),
    ("[1, 2]", "not a JSON object"),
    ("{not json", "malformed JSON")])
def test_bad_bodies_fail_the_case_with_a_clear_error(server, body, match):
    with pytest.raises(HttpSystemError, match=match):
        server(Script(("json", body)), retries=0).answer(REQ)


def test_other_4xx_is_not_retried(server):
    script = Script(("status", 400), ("json", OK))
    with pytest.raises(HttpSystemError, match="HTTP 400"):
        server(script).answer(REQ)
    assert len(script.times) == 1
