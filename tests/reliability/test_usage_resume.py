"""Model usage after a resume covers the whole run, not the last process: every record keeps
what the run's model client spent since the record before it, and ``metrics.json``
``model_usage`` is their sum (it used to count only the last process: 113 of 666 requests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.graders.fake_anthropic import bad_request, fake_model
from tests.graders.test_run_claude import _subset
from tests.llm.backends import ANTHROPIC


def _run(tmp: Path, env: dict[str, str], cases: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "raglab.cli", "run", "grader=claude", "tracking=none",
           f"hydra.run.dir={tmp / 'run'}", f"cache_dir={tmp / 'cache'}",
           f"dataset.cases={cases}", "progress=off", "max_error_rate=1.0"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp)


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
def test_usage_after_a_resume_counts_every_process(tmp_path):
    cases = _subset(tmp_path, n_answerable=4, n_unanswerable=2)
    be = ANTHROPIC
    with be.server(handler=fake_model) as srv:
        env = be.env(srv)
        faults = 3
        srv.push(*[bad_request() for _ in range(faults)])  # three calls fail: their cases too
        p1 = _run(tmp_path, env, cases)
        assert p1.returncode in (0, 1), p1.stderr[-3000:]
        m1 = json.loads((tmp_path / "run" / "metrics.json").read_text())
        assert m1["errors"] > 0
        first = len(be.requests(srv))
        p2 = _run(tmp_path, env, cases)  # the resume runs the failed cases again
        assert p2.returncode == 0, p2.stderr[-3000:]
        answered = len(be.requests(srv)) - faults
    assert len(be.requests(srv)) > first  # the second process made calls of its own
    m2 = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m2["errors"] == 0
    usage = m2["model_usage"]
    assert usage["requests"] == answered  # both processes' requests, not the last one's
    assert usage["cost_usd"] is not None and usage["cost_usd"] > m1["model_usage"]["cost_usd"]
    records = [json.loads(x) for x in
               (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert all("model_usage" in r for r in records)
    assert sum(r["model_usage"]["requests"] for r in records) == answered
    assert sum(r["model_usage"]["input_tokens"] for r in records) == usage["input_tokens"]
