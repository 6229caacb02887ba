"""Issue 37, defect 12: with every judge call failing, the run's summary printed
``correctness 0``, ``relevance 0`` and ``vital_nugget_recall 0`` from the refused cases
beside ``faithfulness n/a``; a metric the judge could not compute is n/a, never 0."""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.conftest import run_cli
from tests.http_stub import post_server


def _refusing_system(h) -> None:
    data = json.dumps({"candidates": [{"doc_id": "kb/a", "text": "Refunds."}],
                       "context": [], "answer": "I don't know."}).encode()
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


def _judge_down(h) -> None:
    data = json.dumps({"error": {"message": "judge down", "type": "server_error"}}).encode()
    h.send_response(500)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
def test_a_run_whose_judge_always_fails_reports_n_a_not_zero(tiny, tmp_path):
    corpus, cases = tiny
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    with post_server(_refusing_system) as system, post_server(_judge_down) as judge:
        env.update(OPENAI_BASE_URL=judge.rstrip("/") + "/v1", OPENAI_API_KEY="sk-test-down",
                   NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        p = run_cli("run", "system=http", f"system.url={system}", "system.retries=0",
                    "grader=openai", "grader.max_retries=0", "tracking=none",
                    "progress=off", "dataset.labels=null", f"dataset.corpus={corpus}",
                    f"dataset.cases={cases}", f"hydra.run.dir={tmp_path / 'run'}",
                    f"cache_dir={tmp_path / 'cache'}", cwd=tmp_path, env=env)
    assert p.returncode == 1, p.stderr  # every case failed: over max_error_rate
    assert "4 of 4 cases failed" in p.stderr
    for name in ("faithfulness", "correctness", "relevance", "vital_nugget_recall"):
        assert re.search(rf"^  {name} +n/a$", p.stdout, re.M), (name, p.stdout)
    overall = json.loads((tmp_path / "run" / "metrics.json").read_text())["overall"]
    assert overall["correctness"] is None and overall["vital_nugget_recall"] is None
    assert overall["false_refusal_rate"] == 1.0  # the offline rule still sees the refusals
