"""End to end: ``raglab run grader=openai grader.mode=batch`` in a real subprocess against a
local fake with OpenAI's Batch API: the verdicts of ordinary calls at half the cost, and a
run killed (SIGKILL) while its batch is pending resumes by collecting that batch, not by
sending its requests again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.graders.fake_anthropic import fake_model
from tests.graders.test_run_claude import _subset
from tests.llm.backends import OPENAI
from tests.llm.fake_openai import CHAT
from tests.llm.fake_openai_batch import BATCHES, FakeOpenAIBatch


def _cmd(tmp: Path, run_dir: str, cache: str, cases: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "raglab.cli", "run", "grader=openai", "tracking=none",
            f"hydra.run.dir={tmp / run_dir}", f"cache_dir={tmp / cache}",
            f"dataset.cases={cases}", "progress=off", *extra]


BATCH = ("grader.mode=batch", "grader.batch_poll_s=0.05")


def _run(cmd: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=cwd)
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def _judged(tmp: Path, run_dir: str) -> tuple[dict, dict]:
    """Each case's verdict labels and metrics; the run's model usage."""
    recs = [json.loads(x) for x in (tmp / run_dir / "records.jsonl").read_text().splitlines()]
    out = {}
    for r in recs:
        assert r["error"] is None, r["error"]
        metrics = {k: v for k, v in r["metrics"].items()  # what a call costs is apart
                   if not k.startswith("latency_ms.") and k != "grading_cost_usd"}
        out[r["case_id"]] = (json.dumps(_labels(r["verdicts"]), sort_keys=True), metrics)
    return out, json.loads((tmp / run_dir / "metrics.json").read_text())["model_usage"]


def _labels(obj):
    """The verdicts without what differs from call to call (latency, cost, usage)."""
    if isinstance(obj, dict):
        return {k: _labels(v) for k, v in obj.items()
                if k not in ("latency_ms", "cost_usd", "usage", "grading_cost_usd")}
    if isinstance(obj, list):
        return [_labels(v) for v in obj]
    return obj


def _online(tmp: Path, cases: Path) -> tuple[dict, dict]:
    with FakeOpenAIBatch(handler=fake_model) as srv:
        _run(_cmd(tmp, "online", "cache-online", cases), OPENAI.env(srv), tmp)
        assert srv.calls(BATCHES, "POST") == []
    return _judged(tmp, "online")


@pytest.mark.slow  # end-to-end CLI runs: CI's slow pass
def test_batch_run_gives_the_online_verdicts_at_half_the_cost(tmp_path):
    cases = _subset(tmp_path, 4, 2)
    online, online_usage = _online(tmp_path, cases)
    with FakeOpenAIBatch(handler=fake_model, batch_polls=2) as srv:
        _run(_cmd(tmp_path, "batch", "cache-batch", cases, *BATCH), OPENAI.env(srv), tmp_path)
        assert srv.calls(CHAT) == []  # every judgment went through a batch
        creates = len(srv.calls(BATCHES, "POST"))
    batch, usage = _judged(tmp_path, "batch")
    assert batch == online
    assert usage["batches"] == creates >= 1
    assert usage["requests"] == online_usage["requests"] > 0
    assert usage["input_tokens"] == online_usage["input_tokens"]
    assert usage["cost_usd"] == pytest.approx(online_usage["cost_usd"] / 2, abs=1e-6)


@pytest.mark.slow
def test_a_killed_batch_run_resumes_by_collecting_its_batch(tmp_path):
    cases = _subset(tmp_path, 4, 2)
    online, online_usage = _online(tmp_path, cases)
    with FakeOpenAIBatch(handler=fake_model) as srv:
        env = OPENAI.env(srv)
        cmd = _cmd(tmp_path, "batch", "cache-batch", cases, *BATCH)
        srv.hold = True  # the first batch stays in progress
        proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while not [c for c in srv.calls(method="GET") if c["path"].startswith(BATCHES)]:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "no batch was sent"
                time.sleep(0.05)
            os.kill(proc.pid, signal.SIGKILL)  # the batch is pending: its id was journalled
        finally:
            proc.wait(timeout=60)
            if proc.stderr:
                proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL
        (first,) = srv.openai_batches
        n_log = len(srv.calls())
        srv.hold = False

        _run(cmd, env, tmp_path)  # the same command resumes
        after = srv.calls()[n_log:]
        assert any(c["path"] == f"{BATCHES}/{first}" for c in after)  # collected
        sent = [json.dumps(line["body"], sort_keys=True)
                for b in srv.openai_batches for line in srv.batch_requests(b)]
        assert len(sent) == len(set(sent))  # no request was sent (or paid for) twice
        assert srv.calls(CHAT) == []
    resumed, usage = _judged(tmp_path, "batch")
    assert resumed == online
    assert usage["cost_usd"] == pytest.approx(online_usage["cost_usd"] / 2, abs=1e-6)
