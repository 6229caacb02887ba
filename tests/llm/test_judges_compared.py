"""A Claude-graded and an OpenAI-graded run of the same cases, through the real CLI: the
OpenAI judge fills every metric the Claude judge fills, and ``raglab compare`` refuses the
pair (exit 3: different metric versions) unless told to compare anyway."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.graders.fake_anthropic import fake_model
from tests.graders.test_run_claude import _subset
from tests.llm.backends import ANTHROPIC, OPENAI


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_claude_and_openai_judges_fill_the_same_metrics_and_are_not_compared(tmp_path):
    cases = _subset(tmp_path, 4, 2)
    runs = {}
    for be in (ANTHROPIC, OPENAI):
        with be.server(handler=fake_model) as srv:
            p = run_cli("run", f"grader={be.grader}", "tracking=none", "progress=off",
                        f"hydra.run.dir={tmp_path / be.grader}",
                        f"cache_dir={tmp_path / 'cache'}", f"dataset.cases={cases}",
                        cwd=tmp_path, env=be.env(srv))
            assert p.returncode == 0, p.stderr[-3000:]
            assert be.requests(srv)  # graded through its own backend (no shared cache entry)
        runs[be.grader] = json.loads((tmp_path / be.grader / "metrics.json").read_text())
    claude, openai = runs["claude"], runs["openai"]
    filled = {k for k, v in claude["overall"].items() if v is not None}
    assert filled == {k for k, v in openai["overall"].items() if v is not None}
    assert {"faithfulness", "correctness", "relevance", "nugget_recall",
            "citation_precision", "contradicted_claim_rate"} <= filled
    # the same fake model behind both protocols: the same verdicts, the same scores
    scores = {k for k in filled if not k.startswith("latency_ms.") and "cost_usd" not in k}
    assert {k: claude["overall"][k] for k in scores} == {k: openai["overall"][k] for k in scores}
    assert openai["errors"] == 0 and openai["model_usage"]["cost_usd"] > 0
    from raglab.metrics.versions import GRADED_FAMILIES

    graded = set(GRADED_FAMILIES)
    assert all(claude["metric_versions"][f] != openai["metric_versions"][f] for f in graded)

    p = run_cli("compare", str(tmp_path / "claude"), str(tmp_path / "openai"),
                "--out", str(tmp_path / "cmp"), cwd=tmp_path)
    assert p.returncode == 3, p.stdout + p.stderr
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "faithfulness" in err[0], p.stderr
    assert not (tmp_path / "cmp" / "compare.json").exists()
    p = run_cli("compare", str(tmp_path / "claude"), str(tmp_path / "openai"),
                "--allow-version-mismatch", "--out", str(tmp_path / "cmp2"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
