"""End to end: ``raglab run grader=claude`` (and ``grader=openai``, ``generator=anthropic``,
``generator=openai``) in a real subprocess against the fake API of each backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raglab.data.dataset import resolve_path
from tests.graders.fake_anthropic import FakeAnthropic, fake_model, user_text
from tests.llm.backends import BACKENDS, Backend
from tests.llm.fake_openai import as_messages_body

NON_NULL = ("faithfulness", "correctness", "relevance", "vital_nugget_recall",
            "citation_precision", "false_refusal_rate", "false_answer_rate")


def _subset(tmp: Path, n_answerable: int = 8, n_unanswerable: int = 4) -> Path:
    """A small slice of the demo cases (both kinds), to keep the test quick."""
    lines = resolve_path("pkg://raglab/datasets/demo/cases.jsonl").read_text().splitlines()
    cases = [json.loads(x) for x in lines if x.strip()]
    pick = ([c for c in cases if c["answerable"] and c.get("nuggets")][:n_answerable]
            + [c for c in cases if not c["answerable"]][:n_unanswerable])
    out = tmp / "cases.jsonl"
    out.write_text("".join(json.dumps(c) + "\n" for c in pick))
    return out


def _env(url: str | None, key: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    if url:
        env["ANTHROPIC_BASE_URL"] = url
    if key:
        env["ANTHROPIC_API_KEY"] = key
    return env


def _run(tmp: Path, run_dir: str, env: dict[str, str], cases: Path,
         grader: str = "claude") -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "raglab.cli", "run", f"grader={grader}", "tracking=none",
           f"hydra.run.dir={tmp / run_dir}", f"cache_dir={tmp / 'cache'}",
           f"dataset.cases={cases}", "progress=off"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                          cwd=tmp)


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
@pytest.mark.parametrize("be", BACKENDS, ids=lambda b: b.grader)
def test_run_with_model_grader_end_to_end(tmp_path, be: Backend):
    cases = _subset(tmp_path)
    with be.server(handler=fake_model) as srv:
        env = be.env(srv)
        p = _run(tmp_path, "run1", env, cases, be.grader)
        assert p.returncode == 0, p.stderr[-3000:]
        first = len(be.requests(srv))
        assert first > 0
        metrics = json.loads((tmp_path / "run1" / "metrics.json").read_text())
        for name in NON_NULL:
            assert metrics["overall"].get(name) is not None, name
        assert metrics["errors"] == 0
        # a judgment is at most one request (none when the client's cache already has it)
        assert 0 < first <= metrics["work"]["grader_calls"]
        assert all(c["headers"]["authorization"] == f"Bearer {be.key}"
                   for c in srv.calls())
        assert all("temperature" not in c["body"] for c in be.requests(srv))
        usage = metrics["model_usage"]  # summed per run: requests, tokens, cost
        assert usage["requests"] == first and usage["input_tokens"] > 0
        assert usage["cost_usd"] is not None and usage["cost_usd"] > 0

        # the same configuration again (new run directory, same cache): no request at all
        p2 = _run(tmp_path, "run2", env, cases, be.grader)
        assert p2.returncode == 0, p2.stderr[-3000:]
        assert len(be.requests(srv)) == first
        metrics2 = json.loads((tmp_path / "run2" / "metrics.json").read_text())
        assert metrics2["work"]["grader_calls"] == 0
        assert metrics2["model_usage"]["requests"] == 0 and metrics2["model_usage"]["cost_usd"] == 0
        w = metrics["work"]
        assert metrics2["work"]["grader_cache_hits"] == w["grader_calls"] + w["grader_cache_hits"]
        same = {k: v for k, v in metrics["overall"].items() if not k.startswith("latency")}
        assert {k: metrics2["overall"][k] for k in same} == same

    # the key is in no file raglab wrote, nor in what it printed; nor the server's URL
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert be.key.encode() not in f.read_bytes(), f
    assert be.key not in p.stdout + p.stderr + p2.stdout + p2.stderr
    if be.name == "openai":
        resolved = (tmp_path / "run1" / "config.yaml").read_text()
        assert "structured_output: json_schema" in resolved and srv.url not in resolved


def test_missing_key_fails_before_any_work(tmp_path):
    cases = _subset(tmp_path, 2, 1)
    with FakeAnthropic(handler=fake_model) as srv:
        p = _run(tmp_path, "run", _env(srv.url, None), cases)
        assert srv.log == []
    assert p.returncode != 0
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "ANTHROPIC_API_KEY" in err[0], p.stderr
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "run" / "records.jsonl").exists()
    assert not (tmp_path / "run" / "metrics.json").exists()


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
@pytest.mark.parametrize("be", BACKENDS, ids=lambda b: b.generator)
def test_model_generator_end_to_end(tmp_path, be: Backend):
    """generator=anthropic|openai through the same client: the prompt template is rendered,
    the answer and its [n] citations are recorded, usage and latency too; a rerun is
    cached."""
    cases = _subset(tmp_path, 3, 1)

    def model(body):
        if body.get("output_config"):
            return fake_model(body)
        return "Refunds go back to the card [1]. It takes a while [2]."

    with be.server(handler=model) as srv:
        env = be.env(srv)
        cmd = [sys.executable, "-m", "raglab.cli", "run", f"generator={be.generator}",
               "grader=none",
               "tracking=none", f"hydra.run.dir={tmp_path / 'gen'}",
               f"cache_dir={tmp_path / 'cache'}", f"dataset.cases={cases}", "progress=off"]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                           cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-3000:]
        gen_calls = be.requests(srv)
        assert len(gen_calls) == 4
        body = gen_calls[0]["body"]
        if be.name == "openai":
            assert body["model"] == "gpt-4.1-mini" and "response_format" not in body
            body = as_messages_body(body)
        else:
            assert body["model"] == "claude-sonnet-4-6"
        assert "Question:" in user_text(body)
        assert "Passages:" in user_text(body) and "[1]" in user_text(body)
        recs = [json.loads(x)
                for x in (tmp_path / "gen" / "records.jsonl").read_text().splitlines()]
        for r in recs:
            out = r["output"]
            assert out["answer"].startswith("Refunds go back")
            assert out["citations"][0] == {"sentence": 0, "context": [0]}
            assert out["usage"]["input_tokens"] > 0 and out["latency_ms"]["generate"] >= 0
        m = json.loads((tmp_path / "gen" / "metrics.json").read_text())
        assert m["model_usage"]["requests"] == 4
        # the generator's own prices (conf/generator/NAME.yaml) price its usage
        assert m["overall"]["cost_usd_per_query"] > 0
        # the same run again: generation comes from the stage cache, no request
        cmd[cmd.index(f"hydra.run.dir={tmp_path / 'gen'}")] = f"hydra.run.dir={tmp_path / 'gen2'}"
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                           cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-3000:]
        assert len(be.requests(srv)) == 4


def test_openai_grader_without_key_or_server_fails_before_any_work(tmp_path):
    cases = _subset(tmp_path, 2, 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    p = _run(tmp_path, "run", env, cases, "openai")
    assert p.returncode != 0
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "OPENAI_API_KEY" in err[0] and "grader.base_url" in err[0], p.stderr
    assert not (tmp_path / "run" / "records.jsonl").exists()


def test_openai_grader_with_a_local_server_needs_no_key(tmp_path):
    """A local server (grader.base_url), no OPENAI_API_KEY: a placeholder key is sent."""
    from tests.llm.backends import OPENAI

    cases = _subset(tmp_path, 1, 0)
    with OPENAI.server(handler=fake_model) as srv:
        env = OPENAI.env(srv, key=False)
        env.pop("OPENAI_BASE_URL")
        cmd = [sys.executable, "-m", "raglab.cli", "run", "grader=openai", "tracking=none",
               f"grader.base_url={srv.base_url}", "grader.model=llama3.1",
               f"hydra.run.dir={tmp_path / 'run'}", f"cache_dir={tmp_path / 'cache'}",
               f"dataset.cases={cases}", "progress=off"]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                           cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-3000:]
        calls = OPENAI.requests(srv)
        assert calls and all(c["body"]["model"] == "llama3.1" for c in calls)
        assert all(c["headers"]["authorization"] == "Bearer no-key" for c in calls)
