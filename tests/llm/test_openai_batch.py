"""``mode: batch`` of the openai backend through the real ``openai`` SDK against a local fake
with OpenAI's Batch API: one batch for the queued requests, half the price, failed and
expired requests, a resume that collects the batch a killed client sent, and the online
fallback of a server without the Batch API."""

from __future__ import annotations

import asyncio
import json

import pytest

from raglab.cache import content_key
from raglab.llm.backends.openai_batch import JOURNAL
from raglab.llm.client import LLMCallError
from tests.llm.fake_openai import CHAT, FakeOpenAI, fake_openai_env
from tests.llm.fake_openai_batch import BATCHES, FILES, fake_openai_batch
from tests.llm.test_openai_backend import PRICES, client, req

__all__ = ["fake_openai_batch"]  # the fixture


def echo(body):
    return json.dumps({"answer": body["messages"][0]["content"]})


def ask_all(reqs, tmp_path=None, **kw):
    async def go():
        c = client(tmp_path, mode="batch", batch_poll_s=0.02, **kw)
        try:
            out = await asyncio.gather(*(c.complete(r) for r in reqs), return_exceptions=True)
        finally:
            await c.aclose()
        return out, c

    return asyncio.run(go())


def test_queued_requests_go_in_one_batch_at_half_price(fake_openai_batch, tmp_path):
    srv = fake_openai_batch
    srv.handler, srv.batch_polls = echo, 2
    out, c = ask_all([req(f"q{i}") for i in range(5)], tmp_path)
    assert [r.parsed for r in out] == [{"answer": f"q{i}"} for i in range(5)]
    assert srv.calls(CHAT) == [] and len(srv.calls(FILES, "POST")) == 1
    (create,) = srv.calls(BATCHES, "POST")
    assert create["body"]["endpoint"] == CHAT and create["body"]["completion_window"] == "24h"
    (batch_id,) = srv.openai_batches
    lines = srv.batch_requests(batch_id)
    assert len({x["custom_id"] for x in lines}) == 5
    assert {x["method"] for x in lines} == {"POST"} and {x["url"] for x in lines} == {CHAT}
    assert lines[0]["body"]["response_format"]["type"] == "json_schema"
    u = out[0].usage
    full = (u["input_tokens"] * PRICES["input"] + u["output_tokens"] * PRICES["output"]
            + u["cache_read_input_tokens"] * PRICES["cache_read"]) / 1e6
    assert out[0].cost_usd == pytest.approx(full / 2)  # batch prices are half
    assert c.batches == 1 and c.calls == 5
    assert srv.files == {} and len(srv.deleted) == 2  # its input and output files, read


def test_a_model_without_json_schema_in_a_batch_is_asked_again_as_text(fake_openai_batch):
    """A batch's HTTP 400 naming response_format marks the model as without json_schema (as
    the online probe does): its requests go again as text, in a new batch, and every later
    batch asks it in text; the verdicts are those of online."""
    srv = fake_openai_batch
    srv.handler, srv.supports = echo, set()
    reqs = [req(f"q{i}") for i in range(3)]
    out, c = ask_all(reqs)
    assert [getattr(r, "parsed", r) for r in out] == [{"answer": f"q{i}"} for i in range(3)]
    assert c.summary()["schema_unsupported"] == 1 and c.batches == 2
    first, again = (srv.batch_requests(b) for b in srv.openai_batches)
    assert {x["body"]["response_format"]["type"] for x in first} == {"json_schema"}
    assert [x["body"].get("response_format") for x in again] == [None] * 3
    assert srv.calls(CHAT) == [] and srv.files == {}

    async def online():
        o = client(None, mode="online")
        try:
            return await asyncio.gather(*(o.complete(r) for r in reqs))
        finally:
            await o.aclose()

    assert [r.parsed for r in asyncio.run(online())] == [r.parsed for r in out]


def test_failed_and_expired_requests_are_one_line_errors(fake_openai_batch):
    srv = fake_openai_batch
    srv.handler = echo
    srv.result_faults.extend(["error", None, "expired"])
    out, _ = ask_all([req("a"), req("b"), req("c")])
    assert isinstance(out[0], LLMCallError) and "HTTP 400" in str(out[0])
    assert out[1].parsed == {"answer": "b"}
    assert isinstance(out[2], LLMCallError) and "batch_expired" in str(out[2])
    assert all("\n" not in str(e) for e in (out[0], out[2]))


def test_a_request_that_failed_in_a_journalled_batch_is_asked_again(fake_openai_batch,
                                                                     tmp_path):
    srv = fake_openai_batch
    srv.handler = echo
    srv.result_faults.append("expired")
    srv.keep_files = True  # the batch can still be read on resume
    out, _ = ask_all([req("a")], tmp_path)
    assert isinstance(out[0], LLMCallError)
    out, c = ask_all([req("a")], tmp_path)  # a resume runs the errored case again
    assert out[0].parsed == {"answer": "a"} and c.batches == 1
    assert len(srv.calls(BATCHES, "POST")) == 2


def test_a_resumed_client_collects_the_batch_a_killed_one_sent(fake_openai_batch, tmp_path):
    srv = fake_openai_batch
    srv.handler, srv.hold = echo, True
    reqs = [req(f"q{i}") for i in range(3)]

    async def killed():  # sends its batch, then dies while the batch is pending
        c = client(tmp_path, mode="batch", batch_poll_s=0.02)
        tasks = [asyncio.ensure_future(c.complete(r)) for r in reqs]
        while not any(x["path"].startswith(BATCHES + "/") for x in srv.calls(method="GET")):
            await asyncio.sleep(0.02)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await c.aclose()

    asyncio.run(killed())
    assert len(srv.calls(BATCHES, "POST")) == 1
    srv.hold = False
    out, c = ask_all(reqs, tmp_path)
    assert [r.parsed for r in out] == [{"answer": f"q{i}"} for i in range(3)]
    assert len(srv.calls(BATCHES, "POST")) == 1 and srv.calls(CHAT) == []  # paid once
    assert c.batches == 0 and c.calls == 3
    assert out[0].cost_usd is not None and out[0].cost_usd > 0  # at the batch price
    # the journal outlives the run; a cached answer no longer needs it
    out2, c2 = ask_all(reqs, tmp_path)
    assert c2.cache_hits == 3 and len(srv.calls(BATCHES, "POST")) == 1


def test_an_unusable_answer_from_a_journalled_batch_is_asked_in_a_new_batch(
        fake_openai_batch, tmp_path):
    srv = fake_openai_batch
    answers = iter(["not json", json.dumps({"answer": "ok"})])
    srv.handler = lambda body: next(answers)
    out, c = ask_all([req("x")], tmp_path)
    assert out[0].parsed == {"answer": "ok"} and c.batches == 2
    journal = client(tmp_path).cache.get(JOURNAL, content_key(JOURNAL, req("x").cache_key(), ""))
    assert journal["batch"] == list(srv.openai_batches)[-1]  # the latest batch


def test_a_server_without_the_batch_api_answers_online_with_one_note(monkeypatch, capsys):
    with FakeOpenAI(handler=echo) as srv:
        fake_openai_env(monkeypatch, srv)
        out, c = ask_all([req("a"), req("b")])
        later, c2 = ask_all([req("c")])
    assert [r.parsed for r in out] == [{"answer": "a"}, {"answer": "b"}]
    assert len(srv.calls(CHAT)) == 3 and len(srv.calls(FILES, "POST")) == 2
    assert c.batches == 0
    online = (out[0].usage["input_tokens"] * PRICES["input"]
              + out[0].usage["output_tokens"] * PRICES["output"]
              + out[0].usage["cache_read_input_tokens"] * PRICES["cache_read"]) / 1e6
    assert out[0].cost_usd == pytest.approx(online)  # the online price
    err = capsys.readouterr().err
    assert err.count("no Batch API") == 2  # once per client (a run has one)
    assert "HTTP 404" in err and "sk-" not in err


def test_a_batch_too_big_for_one_file_is_sent_as_several(fake_openai_batch, monkeypatch):
    from raglab.llm.backends import openai_batch

    monkeypatch.setattr(openai_batch, "MAX_BYTES", 1000)  # about two requests a file
    fake_openai_batch.handler = echo
    out, c = ask_all([req(f"q{i}") for i in range(5)])
    assert [r.parsed for r in out] == [{"answer": f"q{i}"} for i in range(5)]
    assert c.batches == 3
    assert all(len(fake_openai_batch.batch_requests(b)) <= 2
               for b in fake_openai_batch.openai_batches)


def test_a_server_with_files_but_no_batches_answers_online(fake_openai_batch, capsys):
    fake_openai_batch.handler, fake_openai_batch.no_batches = echo, True
    out, c = ask_all([req("a")])
    assert out[0].parsed == {"answer": "a"} and c.batches == 0
    assert len(fake_openai_batch.calls(CHAT)) == 1
    assert capsys.readouterr().err.count("no Batch API") == 1
    assert fake_openai_batch.files == {}  # the uploaded requests, deleted
    assert len(fake_openai_batch.deleted) == 1
