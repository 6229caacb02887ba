"""A local fake of the Anthropic Messages API (and Message Batches), for tests.

    with FakeAnthropic(handler=fake_model) as srv:      # 127.0.0.1, a free port
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
        srv.push(rate_limited(0.05), overloaded(), malformed())   # scripted faults
        ...
        srv.calls("/v1/messages")                        # the request log

``handler(body) -> str | dict`` returns the model's text (a dict may also set ``usage``
and ``stop_reason``). Each POST /v1/messages takes the next scripted fault, if any.
Usage is simulated: words of the system prompt and the user message are "tokens"; a system
prompt sent with ``cache_control`` is written to the cache the first time and read after.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SAMPLING = ("temperature", "top_p", "top_k")

# -- scripted faults ---------------------------------------------------------------------


def rate_limited(retry_after: float = 0.05) -> dict:
    return {"kind": "status", "status": 429, "type": "rate_limit_error",
            "headers": _after(retry_after)}


def _after(retry_after: float | None) -> dict:
    return {} if retry_after is None else {"retry-after": f"{retry_after:g}"}


def overloaded(retry_after: float | None = None) -> dict:
    return {"kind": "status", "status": 529, "type": "overloaded_error",
            "headers": _after(retry_after)}


def server_error(retry_after: float | None = None) -> dict:
    return {"kind": "status", "status": 500, "type": "api_error",
            "headers": _after(retry_after)}


def bad_request() -> dict:
    return {"kind": "status", "status": 400, "type": "invalid_request_error", "headers": {}}


def delay(seconds: float) -> dict:
    return {"kind": "delay", "seconds": seconds}


def malformed() -> dict:
    """HTTP 200 whose JSON body is cut short (a malformed body)."""
    return {"kind": "malformed"}


def truncated() -> dict:
    """HTTP 200 that announces a full body but closes the connection half-way."""
    return {"kind": "truncated"}


def output(text: str, stop_reason: str = "end_turn") -> dict:
    """A well-formed message with this text instead of the handler's."""
    return {"kind": "output", "text": text, "stop_reason": stop_reason}


# -- request helpers ---------------------------------------------------------------------


def system_text(body: dict) -> str:
    s = body.get("system") or ""
    return s if isinstance(s, str) else "".join(b.get("text", "") for b in s)


def user_text(body: dict) -> str:
    out = []
    for m in body.get("messages", []):
        c = m.get("content")
        out.append(c if isinstance(c, str) else "".join(b.get("text", "") for b in c))
    return "\n".join(out)


def _words(text: str) -> int:
    return len(text.split())


# -- the server --------------------------------------------------------------------------


class FakeAnthropic:
    #: the request handler the server runs (a subclass's own protocol: set below each)
    handler_class: type[BaseHTTPRequestHandler]

    def __init__(self, handler: Callable[[dict], Any] | None = None, batch_polls: int = 1):
        self.handler = handler or (lambda body: "ok")
        self.batch_polls = batch_polls  # retrieves answered "in_progress" before "ended"
        self.faults: deque = deque()
        self.batch_result_faults: deque = deque()  # "errored" / "expired", one per result
        self.log: list[dict] = []  # each request; a message's "t_end": its answer begun
        self.in_flight = 0  # POST /v1/messages being answered now, and the most at once
        self.peak_in_flight = 0
        self.batches: dict[str, dict] = {}
        self._seen_systems: set[str] = set()
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self.url = ""

    # context manager ---------------------------------------------------------------------
    def __enter__(self) -> FakeAnthropic:
        fake = self

        class H(self.handler_class):  # type: ignore[name-defined]
            server_fake = fake

        self._httpd = _Server(("127.0.0.1", 0), H)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    # scripting and inspection ------------------------------------------------------------
    def push(self, *faults: dict) -> None:
        self.faults.extend(faults)

    def calls(self, path: str | None = None, method: str | None = None) -> list[dict]:
        with self._lock:
            return [r for r in self.log if (path is None or r["path"] == path)
                    and (method is None or r["method"] == method)]

    def reset(self) -> None:
        with self._lock:
            self.log.clear()
            self.peak_in_flight = self.in_flight

    # responses ---------------------------------------------------------------------------
    def message(self, body: dict, text: str | None = None, stop_reason: str = "end_turn",
                usage: dict | None = None) -> dict:
        if text is None:
            out = self.handler(body)
            if isinstance(out, dict):
                text = out.get("text", "")
                stop_reason = out.get("stop_reason", stop_reason)
                usage = out.get("usage", usage)
            else:
                text = out
        if usage is None:
            usage = self._usage(body, text)
        return {"id": f"msg_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant",
                "model": body.get("model", "unknown"),
                "content": [{"type": "text", "text": text}],
                "stop_reason": stop_reason, "stop_sequence": None, "usage": usage}

    def _usage(self, body: dict, text: str) -> dict:
        sys_words, user_words = _words(system_text(body)), _words(user_text(body))
        cached = isinstance(body.get("system"), list) and any(
            b.get("cache_control") for b in body["system"])
        create = read = 0
        if cached:
            key = system_text(body)
            with self._lock:
                seen = key in self._seen_systems
                self._seen_systems.add(key)
            read, create = (sys_words, 0) if seen else (0, sys_words)
            sys_words = 0
        return {"input_tokens": sys_words + user_words, "output_tokens": max(1, _words(text)),
                "cache_creation_input_tokens": create, "cache_read_input_tokens": read}

    def batch_json(self, b: dict) -> dict:
        now = datetime.now(UTC)
        ended = b["polls"] >= self.batch_polls
        n = len(b["requests"])
        return {"id": b["id"], "type": "message_batch",
                "processing_status": "ended" if ended else "in_progress",
                "request_counts": {"processing": 0 if ended else n,
                                   "succeeded": n if ended else 0, "errored": 0,
                                   "canceled": 0, "expired": 0},
                "created_at": b["created_at"], "expires_at": (now + timedelta(days=1)).isoformat(),
                "ended_at": now.isoformat() if ended else None, "archived_at": None,
                "cancel_initiated_at": None,
                "results_url": f"{self.url}/v1/messages/batches/{b['id']}/results"
                if ended else None}

    def batch_results(self, b: dict) -> bytes:
        lines = []
        for r in b["requests"]:
            fault = self.batch_result_faults.popleft() if self.batch_result_faults else None
            if fault == "errored":
                result = {"type": "errored", "error": {"type": "error", "error": {
                    "type": "invalid_request_error", "message": "fake batch error"}}}
            elif fault in ("expired", "canceled"):
                result = {"type": fault}
            else:
                result = {"type": "succeeded", "message": self.message(r["params"])}
            lines.append(json.dumps({"custom_id": r["custom_id"], "result": result}))
        return ("\n".join(lines) + "\n").encode()


class _Server(ThreadingHTTPServer):
    """A thread per connection. The listen backlog is socketserver's 5 by default: a client
    opening more connections at once than that has its extra SYNs dropped and resent after
    TCP's 1 s initial timeout, so a burst of requests would wait a second at the door."""

    request_queue_size = 128


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: the headers and the body are two writes; with Nagle's algorithm the body
    # waits for the client's delayed ACK of the headers (about 40 ms on Linux per response)
    disable_nagle_algorithm = True
    server_fake: FakeAnthropic

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _read_body(self) -> Any:
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _record(self, body: Any) -> dict:
        fake = self.server_fake
        entry = {"method": self.command, "path": self.path.split("?")[0],
                 "headers": {k.lower(): v for k, v in self.headers.items()},
                 "body": body, "t": time.monotonic()}
        with fake._lock:
            fake.log.append(entry)
        return entry

    def _answered(self) -> None:
        """The message being answered leaves the count in flight: before its answer is
        written, so the client never sees it answered while the count still holds it."""
        entry, self._answering = getattr(self, "_answering", None), None
        if entry is not None:
            fake = self.server_fake
            with fake._lock:
                fake.in_flight -= 1
                entry["t_end"] = time.monotonic()

    def _send(self, status: int, payload: Any, headers: dict | None = None,
              ctype: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self._answered()
        try:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", f"req_{uuid.uuid4().hex[:12]}")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _reply(self, kind: str | None, msg: Any) -> None:
        """Answer 200 with ``msg``, or as the fault ``kind`` spoils it: ``malformed`` (half
        the JSON, with its length), ``truncated`` (a content-length the body falls short
        of, then the connection closed)."""
        data = json.dumps(msg).encode()
        if kind == "malformed":
            return self._send(200, data[: len(data) // 2])
        if kind == "truncated":
            self._answered()
            try:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True
            return None
        return self._send(200, msg)

    def _error(self, status: int, etype: str, headers: dict | None = None) -> None:
        self._send(status, {"type": "error", "error": {"type": etype,
                                                       "message": f"fake {etype}"}}, headers)

    def do_POST(self) -> None:  # noqa: N802
        body = self._read_body()
        entry = self._record(body)
        fake = self.server_fake
        path = self.path.split("?")[0]
        if path == "/v1/messages":
            with fake._lock:
                fault = fake.faults.popleft() if fake.faults else None
                fake.in_flight += 1
                fake.peak_in_flight = max(fake.peak_in_flight, fake.in_flight)
            self._answering = entry
            try:
                self._messages(body, fault)
            finally:
                self._answered()
        elif path == "/v1/messages/batches":
            b = {"id": f"msgbatch_{uuid.uuid4().hex[:16]}", "requests": body["requests"],
                 "polls": 0, "created_at": datetime.now(UTC).isoformat()}
            with fake._lock:
                fake.batches[b["id"]] = b
            self._send(200, fake.batch_json(b))
        else:
            self._error(404, "not_found_error")

    def _messages(self, body: dict, fault: dict | None) -> None:
        fake = self.server_fake
        bad = [k for k in SAMPLING if k in body]
        if bad:  # API version 2026-10-21 rejects sampling parameters at any value
            return self._send(400, {"type": "error", "error": {
                "type": "invalid_request_error",
                "message": f"{bad[0]}: Extra inputs are not permitted"}})
        kind = fault["kind"] if fault else None
        if kind == "status":
            return self._error(fault["status"], fault["type"], fault["headers"])
        if kind == "delay":
            time.sleep(fault["seconds"])
        if kind == "output":
            msg = fake.message(body, fault["text"], fault["stop_reason"])
        else:
            msg = fake.message(body)
        return self._reply(kind, msg)

    def do_GET(self) -> None:  # noqa: N802
        self._record(None)
        fake = self.server_fake
        m = re.fullmatch(r"/v1/messages/batches/([^/]+)(/results)?", self.path.split("?")[0])
        b = fake.batches.get(m.group(1)) if m else None
        if b is None:
            return self._error(404, "not_found_error")
        if m.group(2):
            return self._send(200, fake.batch_results(b), ctype="application/x-jsonl")
        b["polls"] += 1
        return self._send(200, fake.batch_json(b))


# -- a deterministic "model" for the grader prompts --------------------------------------

_TAGGED = r'<{0} index="(\d+)">\s*(.*?)\s*</{0}>'
_REFUSAL = re.compile(r"\b(i don't know|i do not know|not (?:in|covered by) the "
                      r"(?:available )?documents|cannot find)\b", re.I)
_STOP = set("a an the is are was were be to of in on for and or by with at as it its this "
            "that from can you your i".split())


def _terms(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP}


def _block(text: str, tag: str) -> str:
    m = re.search(rf"<{tag}>\s*(.*?)\s*</{tag}>", text, re.S)
    return m.group(1) if m else ""


def fake_model(body: dict) -> str:
    """Answers the four grader prompts from their structure: claims are sentences; a claim
    is SUPPORTED when almost all its terms occur in one passage; nuggets by term overlap."""
    props = ((body.get("output_config") or {}).get("format") or {}).get("schema", {}) \
        .get("properties", {})
    system, user = system_text(body), user_text(body)
    if "decompositions" in props:  # grouped: several reference answers
        items = re.findall(_TAGGED.format("item"), user, re.S)
        return json.dumps({"decompositions": [
            {"answer_index": int(i), "claims": _claims_of(_block(it, "answer"))}
            for i, it in items]})
    if "citation_verdicts" in props:  # grouped: claims and cited sentences, one context
        passages = [p for _, p in re.findall(_TAGGED.format("passage"), system, re.S)]
        cited = re.findall(r'<sentence index="(\d+)" passage="(\d+)">(.*?)</sentence>', user,
                           re.S)
        return json.dumps({
            "verdicts": _verdicts(re.findall(_TAGGED.format("claim"), user, re.S), passages),
            "citation_verdicts": [_verdicts([(i, s)], [passages[int(p) - 1]])[0]
                                  for i, p, s in cited]})
    if "relevance" in props:  # grouped: reference claims, nuggets and relevance, one answer
        answer = _block(user, "answer")
        return json.dumps({
            "verdicts": _verdicts(re.findall(_TAGGED.format("claim"), user, re.S),
                                  [answer.strip()]),
            "judgments": _judgments(user), "relevance": _RELEVANT})
    if "claims" in props:
        return json.dumps({"claims": _claims_of(_block(user, "answer"))})
    if "verdicts" in props:
        passages = [p for _, p in re.findall(_TAGGED.format("passage"), system, re.S)]
        return json.dumps({"verdicts": _verdicts(re.findall(_TAGGED.format("claim"), user,
                                                            re.S), passages)})
    if "judgments" in props:
        return json.dumps({"judgments": _judgments(user)})
    if "label" in props:
        return json.dumps(_RELEVANT)
    return "A fake answer [1]."


_RELEVANT = {"reasoning": "addresses the question", "label": "ANSWERS_AS_ASKED"}


def _claims_of(answer: str) -> list[str]:
    answer = re.sub(r"\s*\[\d+(?:,\s*\d+)*\]", "", answer)
    sents = [s.strip() for s in re.split(r"(?<=[.!?])\s+", answer) if s.strip()]
    return [s for s in sents if not _REFUSAL.search(s) and len(_terms(s)) >= 2]


def _verdicts(claims: list[tuple[str, str]], passages: list[str]) -> list[dict]:
    verdicts = []
    for i, claim in claims:
        terms, best = _terms(claim), ("", 0.0)
        for p in passages:
            cov = len(terms & _terms(p)) / max(1, len(terms))
            best = max(best, (p, cov), key=lambda x: x[1])
        label = "SUPPORTED" if best[1] >= 0.8 else "NOT_FOUND"
        verdicts.append({"claim_index": int(i), "evidence": best[0][:80] if best[1] else "",
                         "reasoning": f"{best[1]:.0%} of the claim's terms", "label": label})
    return verdicts


def _judgments(user: str) -> list[dict]:
    answer = _terms(_block(user, "answer"))
    out = []
    for i, nug in re.findall(_TAGGED.format("nugget"), user, re.S):
        t = _terms(nug)
        cov = len(t & answer) / max(1, len(t))
        label = "YES" if cov >= 0.7 else "PARTIAL" if cov >= 0.4 else "NO"
        out.append({"nugget_index": int(i), "evidence": "", "reasoning": f"{cov:.0%}",
                    "label": label})
    return out


# -- pytest fixture ----------------------------------------------------------------------

TEST_KEY = "test-key-DO-NOT-LOG"


def fake_env(monkeypatch: Any, srv: FakeAnthropic) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


try:
    import pytest

    @pytest.fixture
    def fake_api(monkeypatch: Any):
        """A running fake with the deterministic grader model, and the SDK pointed at it."""
        with FakeAnthropic(handler=fake_model) as srv:
            fake_env(monkeypatch, srv)
            yield srv
except ImportError:  # usable without pytest, as a plain context manager
    pass


FakeAnthropic.handler_class = _Handler
