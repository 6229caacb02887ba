"""Run-level known answers for latency and cost: replayed latencies add up and have
percentiles, a cached rerun reports the latencies of when the stages ran, a priced
generator's and the grader's costs are reported apart, and a judge grading its own model is
flagged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from raglab.metrics.catalog import spec_of
from tests.conftest import run_cli, write_jsonl
from tests.graders.fake_anthropic import TEST_KEY, FakeAnthropic, fake_model
from tests.graders.test_run_claude import _env
from tests.runner.test_resume_refuses_other_versions import _tiny


def _records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _model(body: dict) -> str:
    if body.get("output_config"):
        return fake_model(body)
    return "Refunds are paid back to the original card within 5 business days [1]."


# -- latency and cost --------------------------------------------------------------------

def test_replayed_latencies_add_up_and_have_percentiles(tmp_path):
    stages = {"t-1": (40, 60), "t-2": (50, 150), "t-3": (100, 200), "t-4": (400, 600)}
    rows = [{"case_id": cid, "candidates": [], "context": [], "answer": "I don't know.",
             "latency_ms": {"retrieve": r, "generate": g}} for cid, (r, g) in stages.items()]
    replay = write_jsonl(tmp_path / "replay.jsonl", rows)
    out = tmp_path / "r"
    proc = run_cli("run", *_tiny(tmp_path), "system=replay", f"system.path={replay}",
                   "tracking=none", "progress=off", f"hydra.run.dir={out}",
                   f"cache_dir={tmp_path / 'c'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for rec in _records(out / "records.jsonl"):
        lat = rec["output"]["latency_ms"]
        assert lat["total"] >= lat["retrieve"] + lat["generate"]
    o = json.loads((out / "metrics.json").read_text())["overall"]
    assert o["latency_ms.total"] == pytest.approx((100 + 200 + 300 + 1000) / 4)
    assert o["latency_ms.total.p50"] == pytest.approx(250.0)
    assert o["latency_ms.total.p95"] == pytest.approx(300 + 0.85 * 700)
    assert o["latency_ms.generate.p50"] == pytest.approx(175.0)
    for name in ("latency_ms.total.p50", "latency_ms.generate.p95"):
        assert spec_of(name) is not None and spec_of(name).kind == "latency"
    assert spec_of("grading_cost_usd").kind == "cost"
    assert o["grading_cost_usd"] == 0.0  # the offline grader costs nothing


@pytest.mark.slow  # end to end (CLI runs): in the slow suite
def test_cached_rerun_reports_the_latencies_of_when_the_stages_ran(tmp_path):
    args = ["run", *_tiny(tmp_path), "tracking=none", "progress=off",
            f"cache_dir={tmp_path / 'c'}"]
    for d in ("r1", "r2"):
        assert run_cli(*args, f"hydra.run.dir={tmp_path / d}", cwd=tmp_path).returncode == 0
    r1, r2 = (_records(tmp_path / d / "records.jsonl") for d in ("r1", "r2"))
    for a, b in zip(r1, r2):
        la, lb = a["output"]["latency_ms"], b["output"]["latency_ms"]
        assert la["retrieve"] == lb["retrieve"] and la["generate"] == lb["generate"]
        for lat in (la, lb):
            assert lat["total"] >= lat["retrieve"] + lat["rerank"] + lat["generate"]


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_priced_generator_grader_cost_apart_and_self_grading_flagged(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with FakeAnthropic(handler=_model) as srv:
        env = _env(srv.url, TEST_KEY)
        cmd = [sys.executable, "-m", "raglab.cli", "run", *_tiny(tmp_path), "progress=off",
               "generator=anthropic", "grader=claude", f"tracking.uri={uri}",
               f"hydra.run.dir={tmp_path / 'r1'}", f"cache_dir={tmp_path / 'cache'}"]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                           cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-3000:]
        assert "self-preference" in p.stderr
        m = json.loads((tmp_path / "r1" / "metrics.json").read_text())
        assert any("self-preference" in w for w in m["warnings"])
        o = m["overall"]
        assert o["cost_usd_per_query"] is not None and o["cost_usd_per_query"] > 0
        assert o["grading_cost_usd"] is not None and o["grading_cost_usd"] > 0
        # every case's grading is priced apart from its generation; together they cover what
        # the client spent (a request shared by two cases is spent once, costs each of them)
        recs = _records(tmp_path / "r1" / "records.jsonl")
        assert all(r["metrics"]["grading_cost_usd"] > 0 for r in recs)
        assert all(r["metrics"]["cost_usd_per_query"] > 0 for r in recs)
        total = sum(r["metrics"]["grading_cost_usd"] + r["metrics"]["cost_usd_per_query"]
                    for r in recs)
        assert total >= m["model_usage"]["cost_usd"] - 1e-6
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name("raglab")
        (run,) = client.search_runs([exp.experiment_id])
        assert run.data.tags["raglab.self_graded"] == "true"

        # a cached re-run reports the same costs and stage latencies as when they were computed
        cmd2 = [c for c in cmd if not c.startswith(("hydra.run.dir=", "tracking.uri="))]
        cmd2 += [f"hydra.run.dir={tmp_path / 'r2'}", "tracking=none"]
        p = subprocess.run(cmd2, env=env, capture_output=True, text=True, timeout=300,
                           cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-3000:]
        m2 = json.loads((tmp_path / "r2" / "metrics.json").read_text())
        assert m2["model_usage"]["requests"] == 0
        for k in ("cost_usd_per_query", "grading_cost_usd", "latency_ms.generate"):
            assert m2["overall"][k] == pytest.approx(o[k]), k

        # another grader model: no warning
        cmd3 = cmd2[:-2] + [f"hydra.run.dir={tmp_path / 'r3'}", "tracking=none",
                            "grader.model=claude-other-model"]
        p = subprocess.run(cmd3, env=env, capture_output=True, text=True, timeout=300,
                           cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-3000:]
        assert "self-preference" not in p.stderr
        assert json.loads((tmp_path / "r3" / "metrics.json").read_text())["warnings"] == []
