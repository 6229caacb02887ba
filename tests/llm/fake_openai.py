"""A local fake of the OpenAI Chat Completions API, for tests (the twin of
``tests/graders/fake_anthropic.py``, whose scripted faults and request log it shares).

    with FakeOpenAI(handler=fake_model) as srv:        # 127.0.0.1, a free port
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)   # srv.url + "/v1"
        srv.push(rate_limited(0.05), server_error(), malformed())   # scripted faults
        srv.calls(CHAT)                                  # the request log

``handler(body) -> str | dict`` gets the request in the shape of an Anthropic Messages body
(``system``, ``messages``, ``output_config.format.schema``: the ``json_schema`` of
``response_format``, or in the fallback modes the schema the prompt states), so the grader
"model" of ``fake_anthropic.fake_model`` answers both backends; a dict may set ``text``,
``finish_reason`` and ``usage``. ``supports`` is the set of ``response_format`` types the
server accepts (``json_schema``, ``json_object``): another one is answered with HTTP 400, as
servers without structured output do. In ``text`` mode (no ``response_format``) the fake
wraps its JSON in prose and a code fence, as a chatty local model does.
``misbehave`` makes a small local model of it, for every structured answer: ``prose`` (prose
around the JSON even with ``response_format``), ``no_index`` (items without their
``*_index``), ``one_item`` (only the first item of each list of items), ``garbage`` (no JSON).
Usage is simulated: words are tokens; a system prompt seen before counts as cached.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

from tests.graders.fake_anthropic import (  # noqa: F401  (the shared fault scripts)
    FakeAnthropic,
    _Handler,
    _Server,
    _words,
    delay,
    fake_model,
    malformed,
    rate_limited,
    server_error,
    truncated,
)

CHAT = "/v1/chat/completions"
TEST_OPENAI_KEY = "sk-test-openai-DO-NOT-LOG"
_STATED = re.compile(r"<json_schema>\s*(.*?)\s*</json_schema>", re.S)


def bad_request(message: str = "fake invalid_request_error") -> dict:
    return {"kind": "status", "status": 400, "type": "invalid_request_error", "headers": {},
            "message": message}


def output(text: str, finish_reason: str = "stop") -> dict:
    """A well-formed completion with this text instead of the handler's."""
    return {"kind": "output", "text": text, "stop_reason": finish_reason}


def as_messages_body(body: dict) -> dict:
    """The Chat Completions request as an Anthropic Messages body (for shared handlers)."""
    system = "\n".join(m["content"] for m in body.get("messages", [])
                       if m.get("role") == "system")
    users = [{"role": "user", "content": m["content"]} for m in body.get("messages", [])
             if m.get("role") == "user"]
    schema = None
    rf = body.get("response_format") or {}
    if rf.get("type") == "json_schema":
        schema = rf["json_schema"]["schema"]
    else:
        m = _STATED.search(system)
        if m:
            schema = json.loads(m.group(1))
            system = system[: m.start()]
    out: dict[str, Any] = {"model": body.get("model"), "system": system, "messages": users,
                           "max_tokens": body.get("max_completion_tokens",
                                                  body.get("max_tokens"))}
    if schema is not None:
        out["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
    return out


class FakeOpenAI(FakeAnthropic):
    def __init__(self, handler=None, supports: tuple[str, ...] = ("json_schema", "json_object"),
                 misbehave: str | None = None):
        super().__init__(handler)
        self.supports = set(supports)
        self.misbehave = misbehave

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def completion(self, body: dict, text: str | None = None,
                   finish_reason: str = "stop") -> dict:
        usage = None
        if text is None:
            out = self.handler(as_messages_body(body))
            if isinstance(out, dict):
                text = out.get("text", "")
                finish_reason = out.get("finish_reason", finish_reason)
                usage = out.get("usage")
            else:
                text = out
            structured = body.get("response_format") is not None \
                or "<json_schema>" in json.dumps(body)
            if structured and self.misbehave:
                text = misbehaving(text, self.misbehave)
            if body.get("response_format") is None and "<json_schema>" in json.dumps(body):
                text = f"Here is my judgment.\n```json\n{text}\n```\nI hope this helps."
        if usage is None:
            usage = self._chat_usage(body, text)
        return {"id": f"chatcmpl-{uuid.uuid4().hex[:20]}", "object": "chat.completion",
                "created": int(time.time()), "model": body.get("model", "unknown"),
                "choices": [{"index": 0, "finish_reason": finish_reason, "logprobs": None,
                             "message": {"role": "assistant", "content": text,
                                         "refusal": None}}],
                "usage": usage}

    def _chat_usage(self, body: dict, text: str) -> dict:
        msgs = body.get("messages", [])
        system = "".join(m["content"] for m in msgs if m.get("role") == "system")
        prompt = sum(_words(m["content"]) for m in msgs)
        with self._lock:
            seen = bool(system) and system in self._seen_systems
            self._seen_systems.add(system)
        cached = _words(system) if seen else 0
        out = max(1, _words(text))
        return {"prompt_tokens": prompt, "completion_tokens": out,
                "total_tokens": prompt + out, "prompt_tokens_details": {"cached_tokens": cached}}


def misbehaving(text: str, how: str) -> str:
    """A structured answer as a small model may give it (``FakeOpenAI.misbehave``)."""
    if how == "garbage":
        return "I think the answer is mostly fine, yes."
    if how == "prose":
        return f"Sure! Here is the JSON you asked for:\n{text}\nLet me know if you need more."
    obj = json.loads(text)
    for k, v in obj.items():
        if isinstance(v, list) and v and all(isinstance(it, dict) for it in v):
            if how == "one_item":
                obj[k] = v[:1]
            elif how == "no_index":
                obj[k] = [{f: x for f, x in it.items() if not f.endswith("_index")} for it in v]
    return json.dumps(obj)


class _ChatHandler(_Handler):
    server_fake: FakeOpenAI  # type: ignore[assignment]

    def _error(self, status: int, etype: str, headers: dict | None = None,
               message: str | None = None) -> None:
        self._send(status, {"error": {"message": message or f"fake {etype}", "type": etype,
                                      "param": None, "code": None}}, headers)

    def do_POST(self) -> None:  # noqa: N802
        body = self._read_body()
        entry = self._record(body)
        fake = self.server_fake
        if self.path.split("?")[0] != CHAT:
            return self._error(404, "not_found_error")
        with fake._lock:
            fault = fake.faults.popleft() if fake.faults else None
            fake.in_flight += 1
            fake.peak_in_flight = max(fake.peak_in_flight, fake.in_flight)
        self._answering = entry
        try:
            self._chat(body, fault)
        finally:
            self._answered()
        return None

    def _chat(self, body: dict, fault: dict | None) -> None:
        fake = self.server_fake
        rf = (body.get("response_format") or {}).get("type")
        if rf is not None and rf not in fake.supports:
            return self._error(400, "invalid_request_error",
                               message=f"response_format type {rf!r} is not supported")
        kind = fault["kind"] if fault else None
        if kind == "status":
            return self._error(fault["status"], fault["type"], fault["headers"],
                               fault.get("message"))
        if kind == "delay":
            time.sleep(fault["seconds"])
        if kind == "output":
            msg = fake.completion(body, fault["text"], fault["stop_reason"])
        else:
            msg = fake.completion(body)
        return self._reply(kind, msg)


def fake_openai_env(monkeypatch: Any, srv: FakeOpenAI, key: str | None = TEST_OPENAI_KEY
                    ) -> None:
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(k, raising=False)
    if key:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


try:
    import pytest

    @pytest.fixture
    def fake_openai(monkeypatch: Any):
        """A running fake with the deterministic grader model, and the SDK pointed at it."""
        with FakeOpenAI(handler=fake_model) as srv:
            fake_openai_env(monkeypatch, srv)
            yield srv
except ImportError:  # usable without pytest, as a plain context manager
    pass


FakeOpenAI.handler_class = _ChatHandler
