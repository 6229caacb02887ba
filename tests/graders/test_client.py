"""The one LLM client against a local fake of the Messages API: parsing, retries, cache,
cost accounting, prompt caching, concurrency, batch mode."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time

import pytest

from raglab.cache import StageCache
from raglab.graders.orchestrate import GraderCallError
from raglab.llm.client import LLMClient, LLMRequest, cost_usd
from tests.graders.fake_anthropic import (
    TEST_KEY,
    bad_request,
    delay,
    fake_api,
    malformed,
    output,
    overloaded,
    rate_limited,
    server_error,
    truncated,
)

__all__ = ["fake_api"]  # the fixture

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}},
          "required": ["answer"], "additionalProperties": False}
PRICES = {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.30}
MSG = "/v1/messages"


def req(user: str = "hi", schema: dict | None = SCHEMA, **kw) -> LLMRequest:
    return LLMRequest(model="claude-test", system=kw.pop("system", "You are terse."),
                      user=user, max_tokens=64, schema=schema, **kw)


def client(tmp_path=None, **kw) -> LLMClient:
    opts = dict(timeout_s=5.0, max_retries=2, concurrency=4,
                prices={"claude-test": PRICES})
    opts.update(kw)
    cache = StageCache(tmp_path / "cache") if tmp_path is not None else None
    return LLMClient(cache=cache, **opts)


def run(coro_fn):
    """Run ``coro_fn(client...)`` on a fresh loop."""
    return asyncio.run(coro_fn())


def answer_handler(body):
    return json.dumps({"answer": "forty-two"})


# -- parsing and the request on the wire ------------------------------------------------

def test_structured_output_request_and_parse(fake_api):
    fake_api.handler = answer_handler

    async def go():
        c = client()
        r = await c.complete(req("what?"))
        await c.aclose()
        return r, c

    r, c = run(go)
    assert r.parsed == {"answer": "forty-two"} and r.text == '{"answer": "forty-two"}'
    assert not r.cached and r.latency_ms > 0 and c.calls == 1
    (call,) = fake_api.calls(MSG)
    body = call["body"]
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert body["messages"] == [{"role": "user", "content": "what?"}]
    assert body["system"] == "You are terse." and body["max_tokens"] == 64
    assert "temperature" not in body  # API 2026-10-21 rejects sampling parameters
    assert call["headers"]["authorization"] == f"Bearer {TEST_KEY}"
    assert set(r.usage) == {"input_tokens", "output_tokens", "cache_creation_input_tokens",
                            "cache_read_input_tokens"}


def test_plain_text_without_schema(fake_api):
    fake_api.handler = lambda body: "Just text."

    async def go():
        c = client()
        try:
            return await c.complete(req(schema=None))
        finally:
            await c.aclose()

    r = run(go)
    assert r.text == "Just text." and r.parsed is None
    assert "output_config" not in fake_api.calls(MSG)[0]["body"]


def test_cache_control_on_system_prompt(fake_api):
    fake_api.handler = answer_handler

    async def go():
        c = client()
        a = await c.complete(req("one", cache_system=True, system="long shared context " * 5))
        b = await c.complete(req("two", cache_system=True, system="long shared context " * 5))
        await c.aclose()
        return a, b

    a, b = run(go)
    sysblock = fake_api.calls(MSG)[0]["body"]["system"]
    assert sysblock == [{"type": "text", "text": ("long shared context " * 5),
                         "cache_control": {"type": "ephemeral"}}]
    assert a.usage["cache_creation_input_tokens"] == 15 and a.usage["cache_read_input_tokens"] == 0
    assert b.usage["cache_read_input_tokens"] == 15 and b.usage["cache_creation_input_tokens"] == 0


# -- cost accounting --------------------------------------------------------------------

def test_cost_from_known_usage(fake_api):
    usage = {"input_tokens": 1000, "output_tokens": 200, "cache_creation_input_tokens": 3000,
             "cache_read_input_tokens": 5000}
    fake_api.handler = lambda body: {"text": '{"answer": "x"}', "usage": usage}

    async def go():
        c = client()
        r1 = await c.complete(req("a"))
        r2 = await c.complete(req("b"))
        await c.aclose()
        return c, r1, r2

    c, r1, r2 = run(go)
    expected = (1000 * 3.0 + 200 * 15.0 + 3000 * 3.75 + 5000 * 0.30) / 1e6  # 0.01875
    assert r1.cost_usd == pytest.approx(expected)
    assert c.total_cost_usd == pytest.approx(2 * expected) and c.calls == 2
    assert r1.usage_dict() == {**usage, "cost_usd": pytest.approx(expected)}
    assert cost_usd(usage, PRICES, batch=True) == pytest.approx(expected / 2)


def test_no_prices_means_no_cost(fake_api):
    fake_api.handler = answer_handler

    async def go():
        c = client(prices={})
        try:
            return await c.complete(req())
        finally:
            await c.aclose()

    r = run(go)
    assert r.cost_usd is None and "cost_usd" not in r.usage_dict()
    assert r.usage_dict()["output_tokens"] >= 1
    assert cost_usd({"input_tokens": 5, "cache_read_input_tokens": 5},
                    {"input": 1.0}, False) is None  # a needed price is missing: unknown
    assert cost_usd({"input_tokens": 5}, {"input": 2.0}, False) == pytest.approx(1e-5)


# -- retries ----------------------------------------------------------------------------

def _ok(fake_api, **kw):
    fake_api.handler = answer_handler

    async def go():
        c = client(**kw)
        try:
            return await c.complete(req())
        finally:
            await c.aclose()

    return go


def test_429_retry_after_is_honoured(fake_api):
    fake_api.push(rate_limited(0.7))
    r = run(_ok(fake_api))
    assert r.parsed == {"answer": "forty-two"}
    first, second = fake_api.calls(MSG)
    # the SDK's own first backoff waits at most 0.5 s; retry-after asks for 0.7 s
    assert second["t"] - first["t"] >= 0.65
    assert second["headers"]["x-stainless-retry-count"] == "1"


def test_529_then_500_then_success(fake_api):
    fake_api.push(overloaded(), server_error(0.01))
    t0 = time.perf_counter()
    r = run(_ok(fake_api))
    assert r.parsed == {"answer": "forty-two"} and len(fake_api.calls(MSG)) == 3
    first, second, _ = fake_api.calls(MSG)
    assert second["t"] - first["t"] >= 0.3  # no retry-after: the SDK's backoff (0.375-0.5 s)
    assert time.perf_counter() - t0 < 5


def test_status_errors_after_retries_become_grader_call_error(fake_api):
    fake_api.push(rate_limited(0.01), rate_limited(0.01))
    with pytest.raises(GraderCallError) as e:
        run(_ok(fake_api, max_retries=1))
    assert "RateLimitError" in str(e.value) and "\n" not in str(e.value)
    assert len(fake_api.calls(MSG)) == 2


def test_client_error_is_not_retried(fake_api):
    fake_api.push(bad_request())
    with pytest.raises(GraderCallError, match="BadRequestError"):
        run(_ok(fake_api))
    assert len(fake_api.calls(MSG)) == 1


def test_timeout_is_retried(fake_api):
    fake_api.push(delay(1.5))
    t0 = time.perf_counter()
    r = run(_ok(fake_api, timeout_s=0.3))
    assert r.parsed == {"answer": "forty-two"} and len(fake_api.calls(MSG)) == 2
    assert time.perf_counter() - t0 < 1.4  # did not wait for the slow response


def test_timeout_after_retries_is_an_error(fake_api):
    fake_api.push(delay(1.0), delay(1.0))
    with pytest.raises(GraderCallError, match="APITimeoutError"):
        run(_ok(fake_api, timeout_s=0.2, max_retries=1))


def test_malformed_body_is_retried_then_fails(fake_api):
    fake_api.push(malformed(), malformed())
    assert run(_ok(fake_api)).parsed == {"answer": "forty-two"}
    assert len(fake_api.calls(MSG)) == 3
    fake_api.reset()
    fake_api.push(malformed(), malformed(), malformed())
    with pytest.raises(GraderCallError, match="unreadable response body.*3 attempts") as e:
        run(_ok(fake_api))
    assert "\n" not in str(e.value) and len(fake_api.calls(MSG)) == 3


def test_truncated_body_is_retried_then_fails(fake_api):
    fake_api.push(truncated())
    assert run(_ok(fake_api)).parsed == {"answer": "forty-two"}
    assert len(fake_api.calls(MSG)) == 2
    fake_api.reset()
    fake_api.push(truncated(), truncated())
    with pytest.raises(GraderCallError, match="APIConnectionError"):
        run(_ok(fake_api, max_retries=1))
    assert len(fake_api.calls(MSG)) == 2


def test_unparsable_structured_output_is_retried_then_fails(fake_api):
    fake_api.push(output("Sure! Here is the JSON:"))
    assert run(_ok(fake_api)).parsed == {"answer": "forty-two"}
    fake_api.reset()
    fake_api.push(*[output('{"answer": "cut sho', "max_tokens")] * 3)
    with pytest.raises(GraderCallError, match="max_tokens.*3 attempts"):
        run(_ok(fake_api))
    assert len(fake_api.calls(MSG)) == 3


def test_validation_failure_is_retried_and_not_cached(fake_api, tmp_path):
    fake_api.push(output('{"answer": "wrong"}'))
    fake_api.handler = answer_handler

    def check(parsed):
        if parsed["answer"] != "forty-two":
            raise ValueError("wrong answer")

    async def go():
        c = client(tmp_path)
        r = await c.complete(req(), validate=check)
        r2 = await c.complete(req(), validate=check)
        await c.aclose()
        return r, r2

    r, r2 = run(go)
    assert r.parsed == {"answer": "forty-two"} and r2.cached
    assert len(fake_api.calls(MSG)) == 2


# -- cache ------------------------------------------------------------------------------

def test_cache_hit_makes_no_request(fake_api, tmp_path):
    fake_api.handler = answer_handler

    async def go():
        c = client(tmp_path)
        a = await c.complete(req("same"))
        b = await c.complete(req("same"))
        await c.aclose()
        c2 = client(tmp_path)  # a new process would see the same persistent cache
        d = await c2.complete(req("same"))
        e = await c2.complete(req("same", system="You are verbose."))  # other prompt: miss
        await c2.aclose()
        return a, b, d, e, c, c2

    a, b, d, e, c, c2 = run(go)
    assert not a.cached and b.cached and d.cached and not e.cached
    assert b.parsed == a.parsed and b.usage == a.usage and b.cost_usd == a.cost_usd
    assert len(fake_api.calls(MSG)) == 2
    assert (c.calls, c.cache_hits, c2.calls, c2.cache_hits) == (1, 1, 1, 1)
    assert c2.total_cost_usd == pytest.approx(e.cost_usd)  # hits cost nothing now


def test_identical_concurrent_requests_share_one_call(fake_api):
    fake_api.handler = answer_handler

    async def go():
        c = client()
        rs = await asyncio.gather(*(c.complete(req("dup")) for _ in range(5)))
        await c.aclose()
        return rs

    rs = run(go)
    assert len(fake_api.calls(MSG)) == 1 and all(r.parsed for r in rs)


# -- concurrency and threads ------------------------------------------------------------

def test_concurrency_is_bounded(fake_api):
    active, peak, lock = [0], [0], threading.Lock()

    def slow(body):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.1)
        with lock:
            active[0] -= 1
        return json.dumps({"answer": "x"})

    fake_api.handler = slow

    async def go():
        c = client(concurrency=2)
        await asyncio.gather(*(c.complete(req(f"q{i}")) for i in range(6)))
        await c.aclose()

    run(go)
    assert peak[0] == 2 and len(fake_api.calls(MSG)) == 6


def test_complete_sync_from_worker_threads(fake_api):
    fake_api.handler = lambda body: "generated"

    async def go():
        c = client()
        loop = asyncio.get_running_loop()
        rs = await asyncio.gather(*(loop.run_in_executor(
            None, c.complete_sync, req(f"g{i}", schema=None, purpose="generate"))
            for i in range(4)))
        with pytest.raises(RuntimeError):
            c.complete_sync(req())  # on the loop's own thread it would deadlock
        await c.aclose()
        return rs

    assert [r.text for r in run(go)] == ["generated"] * 4


def test_closed_client_refuses(fake_api):
    async def go():
        c = client()
        await c.aclose()
        await c.complete(req())

    with pytest.raises(GraderCallError, match="closed"):
        run(go)


# -- the run's client --------------------------------------------------------------------

def _cfg(grader: str, generator: str = "anthropic"):
    from raglab.config import LLMCfg
    from raglab.graders.claude import ClaudeGraderCfg
    from raglab.graders.heuristic import HeuristicGraderCfg
    from raglab.systems.generators import AnthropicGenCfg, ExtractiveGenCfg
    from raglab.systems.reference import ReferenceSystemCfg

    class Cfg:
        concurrency = 3
        llm = LLMCfg()
        system = ReferenceSystemCfg(name="reference")

    cfg = Cfg()
    cfg.grader = (ClaudeGraderCfg(name="claude", model="claude-test", prompts="x",
                                  concurrency=7, timeout_s=11, max_retries=1, prices=PRICES)
                  if grader == "claude" else HeuristicGraderCfg(name="heuristic"))
    cfg.generator = (AnthropicGenCfg(name="anthropic", model="claude-gen", timeout_s=22,
                                     max_retries=2, refusal="no")
                     if generator == "anthropic" else ExtractiveGenCfg(name="extractive",
                                                                       refusal="no"))
    return cfg


def test_run_client_settings(tmp_path):
    from raglab.runner.components import llm_client

    cache = StageCache(tmp_path)

    async def go():
        a = llm_client(_cfg("claude"), cache)
        g = llm_client(_cfg("heuristic"), cache)
        none = llm_client(_cfg("heuristic", "extractive"), cache)
        await a.aclose()
        await g.aclose()
        return a, g, none

    a, g, none = run(go)
    # the grader's settings win when it calls a model; else the generator's; else no client
    assert (a.timeout_s, a.max_retries, a.concurrency, a.mode) == (11, 1, 7, "online")
    assert a.prices == {"claude-test": PRICES}
    assert a.cache is cache
    assert (g.timeout_s, g.max_retries, g.concurrency, g.prices) == (22, 2, 3, {})
    assert none is None


# -- batch mode -------------------------------------------------------------------------

def test_batch_mode_end_to_end(fake_api, tmp_path):
    usage = {"input_tokens": 1000, "output_tokens": 100, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    fake_api.handler = lambda body: {"text": json.dumps({"answer": body["messages"][0]
                                                         ["content"]}), "usage": usage}
    fake_api.batch_polls = 2

    async def go():
        c = client(tmp_path, mode="batch", batch_poll_s=0.05)
        rs = await asyncio.gather(*(c.complete(req(f"b{i}")) for i in range(5)))
        gen = await c.complete(req("gen", schema=None, purpose="generate"))
        again = await c.complete(req("b3"))
        await c.aclose()
        return c, rs, gen, again

    c, rs, gen, again = run(go)
    assert [r.parsed["answer"] for r in rs] == [f"b{i}" for i in range(5)]
    (create,) = fake_api.calls("/v1/messages/batches", "POST")
    reqs = create["body"]["requests"]
    assert len(reqs) == 5 and len({r["custom_id"] for r in reqs}) == 5
    assert reqs[0]["params"]["output_config"]["format"]["schema"] == SCHEMA
    assert len([r for r in fake_api.calls() if r["method"] == "GET"
                and not r["path"].endswith("/results")]) >= 2  # polled until ended
    assert len(fake_api.calls(MSG)) == 1  # only the generation went online
    one = (1000 * 3.0 + 100 * 15.0) / 1e6
    assert rs[0].cost_usd == pytest.approx(one / 2)  # batch prices are half
    assert gen.cost_usd == pytest.approx(one) and again.cached
    assert c.batches == 1 and c.total_cost_usd == pytest.approx(5 * one / 2 + one)


def test_batch_errored_and_expired_results(fake_api):
    fake_api.handler = answer_handler
    fake_api.batch_result_faults.extend(["errored", None, "expired"])

    async def go():
        c = client(mode="batch", batch_poll_s=0.05)
        rs = await asyncio.gather(*(c.complete(req(f"e{i}")) for i in range(3)),
                                  return_exceptions=True)
        await c.aclose()
        return rs

    rs = run(go)
    assert isinstance(rs[0], GraderCallError) and "errored" in str(rs[0])
    assert rs[1].parsed == {"answer": "forty-two"}
    assert isinstance(rs[2], GraderCallError) and "expired" in str(rs[2])


def test_batch_retries_unparsable_output_in_a_new_batch(fake_api):
    outputs = iter(["not json", json.dumps({"answer": "ok"})])
    fake_api.handler = lambda body: next(outputs)

    async def go():
        c = client(mode="batch", batch_poll_s=0.05)
        try:
            return await c.complete(req()), c
        finally:
            await c.aclose()

    r, c = run(go)
    assert r.parsed == {"answer": "ok"} and c.batches == 2


# -- the key ----------------------------------------------------------------------------

def test_key_is_never_logged(fake_api, tmp_path, caplog):
    fake_api.handler = answer_handler
    fake_api.push(rate_limited(0.01), malformed())
    caplog.set_level(logging.DEBUG)

    async def go():
        c = client(tmp_path)
        r = await c.complete(req())
        await c.aclose()
        return r

    r = run(go)
    assert TEST_KEY not in caplog.text and TEST_KEY not in repr(r)
    blob = b"".join(p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert TEST_KEY.encode() not in blob
