"""A backend is one registered class: the client gives it the cache, format retries,
concurrency, usage and cost without knowing it."""

from __future__ import annotations

import asyncio
import json

import pytest

from raglab.llm.backends import Backend, Reply, backend_class, register_backend
from raglab.llm.client import LLMCallError, LLMClient, LLMRequest

SCHEMA = {"type": "object", "properties": {"echo": {"type": "string"}},
          "required": ["echo"], "additionalProperties": False}


@register_backend("echo-test")
class Echo(Backend):
    """Answers with the user message as ``{"echo": ...}`` (``bad`` first when asked)."""

    sent: list[str] = []

    async def send(self, req):
        Echo.sent.append(req.user)
        await asyncio.sleep(0.01)  # on the wire a while: an identical request shares it
        if req.user.startswith("bad") and Echo.sent.count(req.user) == 1:
            return Reply("not json", {"input_tokens": 1, "output_tokens": 1}, "stop")
        return Reply(json.dumps({"echo": req.user}), {"input_tokens": 10, "output_tokens": 2},
                     "stop")


def test_a_registered_backend_gets_everything_the_client_shares():
    Echo.sent.clear()

    async def go():
        c = LLMClient(timeout_s=1, max_retries=0, concurrency=2,
                      prices={"m": {"input": 1.0, "output": 1.0}})
        mk = lambda u: LLMRequest(model="m", system="", user=u, max_tokens=8,  # noqa: E731
                                  schema=SCHEMA, backend="echo-test")
        a, b, same = await asyncio.gather(c.complete(mk("hi")), c.complete(mk("bad x")),
                                          c.complete(mk("hi")))
        await c.aclose()
        return a, b, same, c

    a, b, same, c = asyncio.run(go())
    assert a.parsed == {"echo": "hi"} and same.parsed == a.parsed
    assert b.parsed == {"echo": "bad x"}  # unusable once, asked again
    assert sorted(Echo.sent) == ["bad x", "bad x", "hi"]  # the identical pair shared one call
    assert c.summary()["requests"] == 3
    assert c.summary()["cost_usd"] == pytest.approx((12 + 2 + 12) / 1e6)
    assert backend_class("echo-test") is Echo


def test_a_name_taken_by_another_class_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        register_backend("echo-test")(type("Other", (Backend,), {}))
    with pytest.raises(ValueError, match="must subclass"):
        register_backend("plain")(type("Plain", (), {}))


def test_failures_are_one_line_errors():
    class Down(Backend):
        async def send(self, req):
            raise ValueError("not json {")

    register_backend("down-test")(Down)

    async def go():
        c = LLMClient(timeout_s=1, max_retries=0, concurrency=1)
        try:
            await c.complete(LLMRequest(model="m", system="", user="u", max_tokens=8,
                                        backend="down-test"))
        finally:
            await c.aclose()

    with pytest.raises(LLMCallError, match="unreadable response body .* after 3 attempts"):
        asyncio.run(go())
