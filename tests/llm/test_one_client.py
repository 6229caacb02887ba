"""One client per run over both backends: a run graded by an OpenAI-compatible judge whose
system generates with Claude (or the other way round) sends each request through its own
backend, with one cache, one pool of request slots and one account of usage and cost."""

from __future__ import annotations

import asyncio
import json

from raglab.cache import StageCache
from raglab.llm.client import LLMClient, LLMRequest
from tests.graders.fake_anthropic import FakeAnthropic, fake_env
from tests.llm.fake_openai import CHAT, FakeOpenAI, fake_openai_env

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}},
          "required": ["answer"], "additionalProperties": False}


def _answer(body):
    return json.dumps({"answer": "yes"}) if body.get("output_config") else "An answer [1]."


def test_both_backends_through_one_client(monkeypatch, tmp_path):
    with FakeAnthropic(handler=_answer) as ant, FakeOpenAI(handler=_answer) as oai:
        fake_env(monkeypatch, ant)
        fake_openai_env(monkeypatch, oai)
        judge = LLMRequest(model="gpt-judge", system="s", user="u", max_tokens=32,
                           schema=SCHEMA, backend="openai",
                           options=(("token_limit", "max_completion_tokens"),
                                    ("structured_output", "json_schema")))
        gen = LLMRequest(model="claude-gen", system="s", user="u", max_tokens=32,
                         purpose="generate")

        async def go():
            c = LLMClient(timeout_s=5, max_retries=1, concurrency=2, cache=StageCache(tmp_path),
                          prices={"gpt-judge": {"input": 1.0, "output": 2.0, "cache_read": 0.5},
                                  "claude-gen": {"input": 3.0, "output": 15.0}})
            out = await asyncio.gather(c.complete(judge), c.complete(gen))
            again = await asyncio.gather(c.complete(judge), c.complete(gen))
            await c.aclose()
            return out, again, c.summary()

        (j, g), again, summary = asyncio.run(go())
        assert j.parsed == {"answer": "yes"} and g.text == "An answer [1]."
        assert len(oai.calls(CHAT)) == 1 and len(ant.calls("/v1/messages")) == 1
        assert all(r.cached for r in again)
        assert summary["requests"] == 2 and summary["cache_hits"] == 2
        assert summary["cost_usd"] > 0


def test_run_client_for_an_openai_judge(tmp_path):
    from raglab.config import LLMCfg
    from raglab.graders.openai import OpenAIGraderCfg
    from raglab.runner.components import llm_client
    from raglab.systems.generators import AnthropicGenCfg
    from raglab.systems.reference import ReferenceSystemCfg

    class Cfg:
        concurrency = 3
        llm = LLMCfg()
        system = ReferenceSystemCfg(name="reference")
        grader = OpenAIGraderCfg(name="openai", model="llama3.1", prompts="x", concurrency=5,
                                 timeout_s=9, max_retries=1, base_url="http://localhost:1/v1",
                                 prices={"input": 0.0, "output": 0.0})
        generator = AnthropicGenCfg(name="anthropic", model="claude-gen", refusal="no",
                                    prices={"input": 3.0, "output": 15.0})

    async def go():
        c = llm_client(Cfg(), StageCache(tmp_path))
        await c.aclose()
        return c

    c = asyncio.run(go())
    assert (c.timeout_s, c.max_retries, c.concurrency) == (9, 1, 5)
    assert c.prices == {"llama3.1": {"input": 0.0, "output": 0.0},
                        "claude-gen": {"input": 3.0, "output": 15.0}}
