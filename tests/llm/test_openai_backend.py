"""The openai backend through the real ``openai`` SDK against a local fake of the Chat
Completions API: the request on the wire, structured output and its fallbacks, retries,
usage and cost, the cache, the key."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time

import pytest

from raglab.cache import StageCache
from raglab.errors import ConfigError
from raglab.llm.backends.openai import first_json_object
from raglab.llm.client import LLMCallError, LLMClient, LLMFormatError, LLMRequest, json_in
from tests.llm.fake_openai import (
    CHAT,
    TEST_OPENAI_KEY,
    FakeOpenAI,
    bad_request,
    delay,
    fake_openai,
    fake_openai_env,
    malformed,
    output,
    rate_limited,
    server_error,
    truncated,
)

__all__ = ["fake_openai"]  # the fixture

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}},
          "required": ["answer"], "additionalProperties": False}
PRICES = {"input": 2.0, "output": 8.0, "cache_read": 0.5}


def req(user: str = "hi", schema: dict | None = SCHEMA, mode: str = "json_schema",
        **kw) -> LLMRequest:
    return LLMRequest(model="gpt-test", system=kw.pop("system", "You are terse."), user=user,
                      max_tokens=64, schema=schema, backend="openai",
                      options=(("token_limit", "max_completion_tokens"),
                               ("structured_output", mode)), **kw)


def client(tmp_path=None, **kw) -> LLMClient:
    opts = dict(timeout_s=5.0, max_retries=2, concurrency=4, prices={"gpt-test": PRICES})
    opts.update(kw)
    cache = StageCache(tmp_path / "cache") if tmp_path is not None else None
    return LLMClient(cache=cache, **opts)


def ask(*reqs: LLMRequest, tmp_path=None, **kw):
    async def go():
        c = client(tmp_path, **kw)
        try:
            out = [await c.complete(r) for r in reqs]
        finally:
            await c.aclose()
        return out, c

    return asyncio.run(go())


def answer(body):
    return json.dumps({"answer": "forty-two"})


def test_json_schema_request_and_parse(fake_openai):
    fake_openai.handler = answer
    (r,), c = ask(req("what?"))
    assert r.parsed == {"answer": "forty-two"} and not r.cached and c.calls == 1
    (call,) = fake_openai.calls(CHAT)
    body = call["body"]
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "raglab_output", "schema": SCHEMA, "strict": True}}
    assert body["messages"] == [{"role": "system", "content": "You are terse."},
                                {"role": "user", "content": "what?"}]
    assert body["max_completion_tokens"] == 64 and body["model"] == "gpt-test"
    assert "temperature" not in body
    assert call["headers"]["authorization"] == f"Bearer {TEST_OPENAI_KEY}"


def test_plain_text_without_schema_and_max_tokens_field(fake_openai):
    fake_openai.handler = lambda body: "Just text."
    r = LLMRequest(model="gpt-test", system="", user="hi", max_tokens=8, backend="openai",
                   options=(("token_limit", "max_tokens"),), purpose="generate")
    (resp,), _ = ask(r)
    assert resp.text == "Just text." and resp.parsed is None
    body = fake_openai.calls(CHAT)[0]["body"]
    assert "response_format" not in body and body["max_tokens"] == 8
    assert body["messages"] == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("mode", ["json_object", "text"])
def test_fallback_modes_state_the_schema_and_read_the_object(mode):
    """Known answer: a server without json_schema support (it answers 400 to it); the
    schema is stated in the system prompt, the first JSON object of the answer is read."""
    supports = ("json_object",) if mode == "json_object" else ()
    with FakeOpenAI(handler=answer, supports=supports) as srv:
        r = req("q", mode=mode, endpoint=(("base_url", srv.base_url),))
        (resp,), _ = ask(r)
        body = srv.calls(CHAT)[0]["body"]
    assert resp.parsed == {"answer": "forty-two"}
    system = body["messages"][0]["content"]
    assert system.startswith("You are terse.\n\nReply with one JSON object")
    assert json.loads(system.split("<json_schema>")[1].split("</json_schema>")[0]) == SCHEMA
    if mode == "json_object":
        assert body["response_format"] == {"type": "json_object"}
    else:
        assert "response_format" not in body
        assert resp.text.startswith("Here is my judgment.")  # prose around the object


def test_server_without_json_schema_is_probed_once_and_asked_in_text():
    """The first json_schema call to a server that refuses it (HTTP 400) is sent again
    without response_format, the schema stated in the prompt; the client remembers it: the
    other requests to that model go as text at once (it used to fail every call)."""
    async def go(srv):
        c = client()
        try:
            first = await asyncio.gather(*(c.complete(req(f"q{i}", endpoint=(
                ("base_url", srv.base_url),))) for i in range(3)))
            return first, c.summary()
        finally:
            await c.aclose()

    with FakeOpenAI(handler=answer, supports=()) as srv:
        out, summary = asyncio.run(go(srv))
        bodies = [c["body"] for c in srv.calls(CHAT)]
    assert all(r.parsed == {"answer": "forty-two"} for r in out)
    assert len(bodies) == 4 and bodies[0]["response_format"]["type"] == "json_schema"
    assert all("response_format" not in b for b in bodies[1:])
    assert all("<json_schema>" in b["messages"][0]["content"] for b in bodies[1:])
    assert summary["schema_unsupported"] == 1 and summary["requests"] == 3


@pytest.mark.parametrize("status", [400, 422])
def test_probe_any_4xx_of_the_first_call_but_not_a_later_one(status):
    err = {**bad_request("context length exceeded"), "status": status}
    with FakeOpenAI(handler=answer) as srv:
        srv.push(err)  # the probe's answer: taken as "no json_schema" (the text call works)
        (r,), c = ask(req(endpoint=(("base_url", srv.base_url),)))
        assert r.parsed and c.summary()["schema_unsupported"] == 1
    with FakeOpenAI(handler=answer) as srv:  # a server that has it: later 400s are errors
        async def go():
            cl = client()
            try:
                await cl.complete(req("a", endpoint=(("base_url", srv.base_url),)))
                srv.push(bad_request())
                await cl.complete(req("b", endpoint=(("base_url", srv.base_url),)))
            finally:
                await cl.aclose()

        with pytest.raises(LLMCallError, match="BadRequestError"):
            asyncio.run(go())


def test_json_object_mode_without_support_is_one_line_naming_the_fallback():
    with FakeOpenAI(handler=answer, supports=()) as srv:
        with pytest.raises(LLMCallError) as e:
            ask(req(mode="json_object", endpoint=(("base_url", srv.base_url),)))
        assert len(srv.calls(CHAT)) == 1  # a 400 is not retried
    msg = str(e.value)
    assert "\n" not in msg and "structured_output: json_object or text" in msg


def test_json_in_prose_is_read_only_when_it_validates(fake_openai):
    """json_schema mode: a model that talks around its JSON (a small local one) is read;
    what is not a usable object is asked again."""
    fake_openai.handler = lambda b: 'Sure! {"answer": "forty-two"} Anything else?'
    (r,), c = ask(req())
    assert r.parsed == {"answer": "forty-two"} and c.calls == 1
    fake_openai.handler = lambda b: 'Sure! {"answer": 42} or [1, 2]'
    with pytest.raises(LLMFormatError):
        asyncio.run(_validated(req("v")))


async def _validated(r: LLMRequest) -> None:
    def check(p: dict) -> None:
        if not isinstance(p.get("answer"), str):
            raise ValueError("answer must be a string")

    c = client()
    try:
        await c.complete(r, validate=check)
    finally:
        await c.aclose()


def test_json_in():
    assert json_in('[1, {"a": 2}]') == [1, {"a": 2}]
    assert json_in('text [1, 2 {"a": {"b": 1}} y') == {"a": {"b": 1}}
    assert json_in("x ```json\n[3]\n``` y") == [3]
    with pytest.raises(ValueError):
        json_in("no {json here")


def test_first_json_object():
    assert first_json_object('x {"a": {"b": 1}} y {"c": 2}') == '{"a": {"b": 1}}'
    assert first_json_object("no {json here") == "no {json here"
    assert first_json_object('[1] {bad} {"ok": true}') == '{"ok": true}'


def test_usage_and_cost_with_cached_prompt_tokens(fake_openai):
    fake_openai.handler = lambda b: {"text": answer(b), "usage": {
        "prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100,
        "prompt_tokens_details": {"cached_tokens": 400}}}
    (r,), c = ask(req())
    assert r.usage == {"input_tokens": 600, "output_tokens": 100,
                       "cache_creation_input_tokens": 0, "cache_read_input_tokens": 400}
    assert r.cost_usd == pytest.approx((600 * 2.0 + 100 * 8.0 + 400 * 0.5) / 1e6)
    assert c.summary()["cost_usd"] == pytest.approx(r.cost_usd)


def test_429_retry_after_is_honoured(fake_openai):
    fake_openai.handler = answer
    fake_openai.push(rate_limited(0.3))
    t0 = time.perf_counter()
    (r,), _ = ask(req())
    assert r.parsed and time.perf_counter() - t0 >= 0.3
    assert len(fake_openai.calls(CHAT)) == 2


def test_500_then_success(fake_openai):
    fake_openai.handler = answer
    fake_openai.push(server_error(0.01), server_error(0.01))
    (r,), _ = ask(req())
    assert r.parsed and len(fake_openai.calls(CHAT)) == 3


def test_status_errors_after_retries_and_client_errors(fake_openai):
    fake_openai.push(*(server_error(0.01) for _ in range(3)))
    with pytest.raises(LLMCallError, match="InternalServerError"):
        ask(req())
    assert len(fake_openai.calls(CHAT)) == 3
    fake_openai.reset()
    fake_openai.push(bad_request())  # (no schema: not a json_schema probe)
    with pytest.raises(LLMCallError, match="BadRequestError"):
        ask(req(schema=None))
    assert len(fake_openai.calls(CHAT)) == 1


def test_timeout_is_retried_then_an_error(fake_openai):
    fake_openai.handler = answer
    fake_openai.push(delay(1.0))
    (r,), _ = ask(req(), timeout_s=0.3)
    assert r.parsed and len(fake_openai.calls(CHAT)) == 2
    fake_openai.push(delay(1.0), delay(1.0))
    with pytest.raises(LLMCallError, match="Timeout"):
        ask(req("other"), timeout_s=0.3, max_retries=1)


@pytest.mark.parametrize("fault", [malformed, truncated])
def test_bad_bodies_are_retried_then_fail(fake_openai, fault):
    fake_openai.handler = answer
    fake_openai.push(fault())
    (r,), _ = ask(req())
    assert r.parsed == {"answer": "forty-two"}
    fake_openai.push(*(fault() for _ in range(12)))
    with pytest.raises(LLMCallError) as e:
        ask(req("again"), max_retries=0)
    assert "\n" not in str(e.value)


def test_unusable_output_is_retried_then_fails_naming_the_finish_reason(fake_openai):
    fake_openai.handler = answer
    fake_openai.push(output("not json"), output('{"answer": 1'))
    (r,), c = ask(req())
    assert r.parsed == {"answer": "forty-two"} and c.calls == 3
    fake_openai.push(*(output('{"answer": "cut', "length") for _ in range(3)))
    with pytest.raises(LLMCallError, match=r"finish|stop_reason length"):
        ask(req("x"))


def test_cache_hit_makes_no_request_and_holds_no_key(fake_openai, tmp_path, caplog):
    fake_openai.handler = answer
    caplog.set_level(logging.DEBUG)
    (first,), _ = ask(req(), tmp_path=tmp_path)
    (again,), c = ask(req(), tmp_path=tmp_path)
    assert again.cached and again.parsed == first.parsed and c.calls == 0
    assert len(fake_openai.calls(CHAT)) == 1
    blob = b"".join(p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert TEST_OPENAI_KEY.encode() not in blob and TEST_OPENAI_KEY not in caplog.text
    assert fake_openai.base_url.encode() not in blob


def test_cache_key_ignores_the_endpoint_and_keys_the_mode():
    a = req(endpoint=(("base_url", "http://a/v1"),))
    assert a.cache_key() == req(endpoint=(("base_url", "http://b/v1"),)).cache_key()
    assert a.cache_key() != req(mode="text").cache_key()
    claude = LLMRequest(model="gpt-test", system="You are terse.", user="hi", max_tokens=64,
                        schema=SCHEMA)
    assert claude.cache_key() != a.cache_key()


def test_batch_mode_is_sent_online(fake_openai):
    fake_openai.handler = answer
    (r,), c = ask(req(), mode="batch")
    assert r.parsed and len(fake_openai.calls(CHAT)) == 1 and c.batches == 0
    assert r.cost_usd is not None and r.cost_usd > 0  # full price: not a batch


def test_no_key_sends_a_placeholder_to_a_local_server(monkeypatch):
    with FakeOpenAI(handler=answer) as srv:
        fake_openai_env(monkeypatch, srv, key=None)
        (r,), _ = ask(req())
        assert srv.calls(CHAT)[0]["headers"]["authorization"] == "Bearer no-key"


def test_missing_sdk_is_one_line_naming_the_extra(monkeypatch):
    from raglab.llm.backends.openai import require_sdk

    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ConfigError) as e:
        require_sdk("grader=openai")
    assert str(e.value) == "grader=openai needs the openai SDK: pip install 'openai>=3.57,<4'"


def test_preflight_needs_a_key_or_a_server(monkeypatch):
    from raglab.llm.backends.openai import OpenAIEndpoint, check_usable

    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY .* grader.base_url"):
        check_usable("grader=openai", OpenAIEndpoint())
    check_usable("grader=openai", OpenAIEndpoint(base_url="http://localhost:8000/v1"))
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    check_usable("grader=openai", OpenAIEndpoint())


def test_concurrency_is_bounded(fake_openai):
    fake_openai.handler = lambda b: (time.sleep(0.1), answer(b))[1]

    async def go():
        c = client(concurrency=3)
        await asyncio.gather(*(c.complete(req(f"q{i}")) for i in range(9)))
        await c.aclose()

    asyncio.run(go())
    assert fake_openai.peak_in_flight <= 3 and len(fake_openai.calls(CHAT)) == 9


def test_unknown_backend_is_a_config_error():
    from raglab.llm.backends import backend_class

    with pytest.raises(ConfigError, match="unknown LLM backend 'nope'"):
        backend_class("nope")


def test_a_refusal_is_named_in_the_error(fake_openai):
    refusal = {"id": "x", "object": "chat.completion", "created": 0, "model": "gpt-test",
               "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                            "message": {"role": "assistant", "content": None,
                                        "refusal": "I can't help with that."}}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
    fake_openai.completion = lambda body, text=None, finish_reason="stop": refusal
    with pytest.raises(LLMCallError, match="stop_reason refusal"):
        ask(req())
    assert len(fake_openai.calls(CHAT)) == 3  # asked again, twice


def _bounded(limit: int) -> LLMRequest:
    return req(endpoint=(("base_url", None), ("max_body_bytes", limit)))


def test_an_answer_over_max_body_bytes_fails_the_call_at_once(fake_openai):
    """Issue 37, defect 10: a 400 MB answer took 3.7 GB. The body is read up to
    ``max_body_bytes``, as the http adapter reads one: past it the call fails in one line,
    not retried (the server is asked once)."""
    fake_openai.handler = lambda b: json.dumps({"answer": "x" * 50_000})
    with pytest.raises(LLMCallError, match=r"gpt-test: response larger than 4000 bytes "
                                           r"\(max_body_bytes\)$"):
        ask(_bounded(4000))
    assert len(fake_openai.calls(CHAT)) == 1
    (r,), _ = ask(_bounded(200_000))  # a bound above the answer reads it whole
    assert r.parsed == {"answer": "x" * 50_000}


def test_a_compressed_answer_counts_as_decoded(monkeypatch):
    """A small gzip body that decodes to a large one stops at the bound too."""
    import gzip

    from tests.http_stub import post_server

    big = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                      "choices": [{"index": 0, "finish_reason": "stop", "message": {
                          "role": "assistant", "content": " " * 2_000_000}}]}).encode()
    packed = gzip.compress(big)

    def respond(h):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Encoding", "gzip")
        h.send_header("Content-Length", str(len(packed)))
        h.end_headers()
        h.wfile.write(packed)

    with post_server(respond) as url:
        srv = type("Srv", (), {"base_url": url.rstrip("/") + "/v1"})()
        fake_openai_env(monkeypatch, srv)
        assert len(packed) < 10_000
        with pytest.raises(LLMCallError, match="response larger than 100000 bytes"):
            ask(_bounded(100_000))
