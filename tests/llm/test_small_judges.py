"""A judge served by a small local model: the OpenAI grader against a local server that
breaks the batched, indexed JSON (prose around it, items without their indices, one item per
answer) gives the verdicts of a well-behaved server, through one re-ask and then one call per
item; a server that answers garbage fails each judgment in one line. No verdict is guessed."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from raglab.components import BuildContext
from raglab.graders.claude import load_prompts
from raglab.graders.openai import OpenAIGrader, OpenAIGraderCfg
from raglab.llm.client import LLMClient, LLMFormatError
from tests.graders.fake_anthropic import fake_model
from tests.graders.test_run_claude import _subset
from tests.llm.backends import OPENAI
from tests.llm.fake_openai import CHAT, FakeOpenAI

PASSAGES = ["Refunds are paid within 14 days to the original card.",
            "The Pro plan costs 20 euros a month and includes phone support.",
            "Accounts can be closed at any time from the settings page."]
CLAIMS = ["Refunds are paid within 14 days.", "The Pro plan includes phone support.",
          "The moon is made of cheese entirely."]
PAIRS = [["Refunds are paid within 14 days to the card.", 0],
         ["Accounts can be closed from the settings page.", 2]]
QUESTION = "How are refunds paid?"
ANSWER = "Refunds are paid within 14 days to the original card. Support is by phone."
REF_CLAIMS = ["Refunds are paid within 14 days.", "Refunds go to the original card."]
NUGGETS = ["within 14 days", "original card", "bank transfer"]
REFS = [["How are refunds paid?", "Refunds are paid within 14 days. They go to the card."],
        ["What does Pro cost?", "Pro costs 20 euros a month."]]


def _judge(srv: FakeOpenAI) -> tuple[dict, dict, int]:
    """Every batched judgment of the grader against ``srv``: results, the client's
    fallback counters, requests sent."""
    async def go():
        llm = LLMClient(timeout_s=5, max_retries=0, concurrency=4)
        prompts = load_prompts("pkg://raglab/graders/prompts")
        cfg = OpenAIGraderCfg(name="openai", model="small-local", prompts="x",
                              base_url=srv.base_url)
        g = OpenAIGrader(cfg, BuildContext(llm=llm, prompts=prompts))
        out: dict = {}
        try:
            for name, job in (
                    ("context", lambda: g.judge_context(CLAIMS, PAIRS, PASSAGES)),
                    ("answer", lambda: g.judge_answer(QUESTION, ANSWER, REF_CLAIMS, NUGGETS)),
                    ("verify", lambda: g.verify(CLAIMS, PASSAGES, "faithfulness")),
                    ("nuggets", lambda: g.nuggets(QUESTION, ANSWER, NUGGETS)),
                    ("decompose", lambda: g.decompose(QUESTION, ANSWER)),
                    ("reference", lambda: g.decompose_reference(*REFS[0]))):
                try:
                    out[name] = await job()
                except LLMFormatError as e:
                    out[name] = e
            summary = llm.summary()
        finally:
            await llm.aclose()
        return out, summary

    out, summary = asyncio.run(go())
    return out, summary, len(srv.calls(CHAT))


@pytest.fixture(scope="module")
def well_behaved():
    with FakeOpenAI(handler=fake_model) as srv:
        return _judge(srv)


@pytest.mark.parametrize("how", ["prose", "no_index", "one_item"])
def test_a_misbehaving_server_gives_the_well_behaved_verdicts(well_behaved, how):
    good, good_summary, good_calls = well_behaved
    assert good_calls == 6 and not any(isinstance(v, Exception) for v in good.values())
    assert good["context"][0][2][0] == "NOT_FOUND" and good["context"][0][0][0] == "SUPPORTED"
    with FakeOpenAI(handler=fake_model, misbehave=how) as srv:
        out, summary, calls = _judge(srv)
    assert out == good
    assert summary["unreadable_items"] == 0 and summary["schema_unsupported"] == 0
    if how == "prose":  # read from the prose at once: no fallback
        assert calls == good_calls and summary["format_re_asks"] == 0
    else:
        # each batch of several items: asked twice, then once per item (the answer's
        # relevance is an item of its own); a lone item is read as it is
        items = {"context": 5, "answer": 6, "verify": 3, "nuggets": 3}
        assert summary["format_re_asks"] == len(items)
        assert summary["single_item_calls"] == sum(items.values())
        assert calls == 2 + sum(2 + n for n in items.values())


def test_a_server_without_json_schema_gives_the_same_verdicts(well_behaved):
    good, *_ = well_behaved
    with FakeOpenAI(handler=fake_model, supports=()) as srv:
        out, summary, calls = _judge(srv)
        assert srv.calls(CHAT)[0]["body"]["response_format"]["type"] == "json_schema"
        assert all("response_format" not in c["body"] for c in srv.calls(CHAT)[1:])
    assert out == good and summary["schema_unsupported"] == 1 and calls == 7


def test_a_server_answering_garbage_fails_every_judgment_in_one_line():
    with FakeOpenAI(handler=fake_model, misbehave="garbage") as srv:
        out, summary, calls = _judge(srv)
    for name, v in out.items():
        assert isinstance(v, LLMFormatError), name
        assert "\n" not in str(v) and "unusable structured output" in str(v)
    assert "3 of 3 items unreadable, asked alone after their batch" in str(out["nuggets"])
    assert summary["unreadable_items"] == 5 + 6 + 3 + 3 + 1 + 1
    assert summary["requests"] == calls


def _run(tmp, name: str, srv: FakeOpenAI, cases) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "raglab.cli", "run", "grader=openai", "tracking=none",
           f"hydra.run.dir={tmp / name}", f"cache_dir={tmp / ('cache-' + name)}",
           f"dataset.cases={cases}", "progress=off"]
    return subprocess.run(cmd, env=OPENAI.env(srv), capture_output=True, text=True,
                          timeout=300, cwd=tmp)


def _labels(run_dir) -> dict:
    recs = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    return {r["case_id"]: sorted((v["family"], v["kind"], str(v.get("item")), v.get("label"))
                                 for v in r["verdicts"]) for r in recs}


@pytest.mark.slow  # five end-to-end CLI runs
def test_runs_against_small_local_servers(tmp_path):
    """``raglab run grader=openai`` against stand-in servers: every graded metric of a
    misbehaving one equals the well-behaved one's, its fallbacks counted in metrics.json and
    the report; at most 3 judge calls per case from a well-behaved one; a garbage one fails
    its cases, and the run, in one line each."""
    cases = _subset(tmp_path, 4, 1)
    with FakeOpenAI(handler=fake_model) as srv:
        p = _run(tmp_path, "good", srv, cases)
        assert p.returncode == 0, p.stderr[-3000:]
        assert len(srv.calls(CHAT)) <= 3 * 5
    good = json.loads((tmp_path / "good" / "metrics.json").read_text())
    assert good["errors"] == 0 and good["model_usage"]["single_item_calls"] == 0
    graded = {k: v for k, v in good["overall"].items()  # (what the fallbacks cost aside)
              if not k.startswith("latency") and "cost" not in k}
    assert all(graded[m] is not None for m in ("faithfulness", "correctness", "relevance",
                                                "vital_nugget_recall", "citation_precision"))
    for how, kw in (("one_item", {"misbehave": "one_item"}),
                    ("no_index", {"misbehave": "no_index"}), ("no_schema", {"supports": ()})):
        with FakeOpenAI(handler=fake_model, **kw) as srv:
            p = _run(tmp_path, how, srv, cases)
        assert p.returncode == 0, p.stderr[-3000:]
        m = json.loads((tmp_path / how / "metrics.json").read_text())
        assert {k: m["overall"][k] for k in graded} == graded, how
        assert _labels(tmp_path / how) == _labels(tmp_path / "good"), how
        usage = m["model_usage"]
        assert usage["unreadable_items"] == 0
        if how == "no_schema":
            assert usage["schema_unsupported"] == 1 and usage["single_item_calls"] == 0
        else:
            assert usage["format_re_asks"] > 0 and usage["single_item_calls"] > 0
        report = (tmp_path / how / "report.md").read_text()
        assert "## Judge output fallbacks" in report
        assert "| single_item_calls |" in report
    with FakeOpenAI(handler=fake_model, misbehave="garbage") as srv:
        p = _run(tmp_path, "garbage", srv, cases)
    assert p.returncode == 1
    err = [x for x in p.stderr.splitlines() if x.startswith("raglab: error:")]
    assert len(err) == 1 and "no JSON in the answer" in err[0], p.stderr
    assert "Traceback" not in p.stderr
    m = json.loads((tmp_path / "garbage" / "metrics.json").read_text())
    assert m["errors"] == 5 and m["overall"]["faithfulness"] is None
    assert m["model_usage"]["unreadable_items"] >= 5


def test_the_report_shows_every_fallback_counter():
    from raglab.llm.client import FALLBACK_FIELDS
    from raglab.report.summary import FALLBACK_ROWS, fallback_rows

    assert [k for k, _ in FALLBACK_ROWS] == list(FALLBACK_FIELDS)
    assert fallback_rows({}) == [] and fallback_rows({"model_usage": None}) == []
    rows = fallback_rows({"model_usage": {"requests": 3, "single_item_calls": 4}})
    assert [r[2] for r in rows] == ["0", "4", "0", "0"]
