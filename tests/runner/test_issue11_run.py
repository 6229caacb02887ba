"""Known answers for issue 11 at the run level: resume refuses other metric versions (9),
latency reported from when each stage ran, percentiles, priced generator and grading cost
apart (10), a judge grading its own model is flagged (12)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from raglab.data.dataset import resolve_path
from raglab.metrics.catalog import spec_of
from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl
from tests.graders.fake_anthropic import TEST_KEY, FakeAnthropic, fake_model
from tests.graders.test_run_claude import _env


def _records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _tiny(tmp: Path) -> list[str]:
    c = write_jsonl(tmp / "corpus.jsonl", TINY_CORPUS)
    k = write_jsonl(tmp / "cases.jsonl", TINY_CASES)
    return [f"dataset.corpus={c}", f"dataset.cases={k}", "dataset.labels=null"]


def _model(body: dict) -> str:
    if body.get("output_config"):
        return fake_model(body)
    return "Refunds are paid back to the original card within 5 business days [1]."


def _claude_run(tmp: Path, run_dir: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "raglab.cli", "run", *_tiny(tmp), "tracking=none",
           "progress=off", f"hydra.run.dir={run_dir}", f"cache_dir={tmp / 'cache'}", *extra]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp)


# -- 9: resume checks every family's metric version ------------------------------------------

def test_resume_after_a_grader_prompt_changed_is_refused(tmp_path):
    prompts = tmp_path / "prompts"
    shutil.copytree(resolve_path("pkg://raglab/graders/prompts"), prompts)
    out = tmp_path / "r"
    with FakeAnthropic(handler=fake_model) as srv:
        env = _env(srv.url, TEST_KEY)
        p = _claude_run(tmp_path, out, env, "grader=claude", f"grader.prompts={prompts}")
        assert p.returncode == 0, p.stderr[-3000:]
        first = json.loads((out / "metrics.json").read_text())
        # an interrupted run: the last two records are lost
        recs = (out / "records.jsonl").read_text().splitlines()
        (out / "records.jsonl").write_text("\n".join(recs[:2]) + "\n")
        before = (out / "records.jsonl").read_bytes()
        # one word of the verify prompt changes; the configuration text does not
        v = prompts / "verify.txt"
        v.write_text(v.read_text().replace("strict, careful", "strict"))
        n_calls = len(srv.calls())
        p = _claude_run(tmp_path, out, env, "grader=claude", f"grader.prompts={prompts}")
    assert p.returncode == 3, (p.returncode, p.stderr[-2000:])
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    old = first["metric_versions"]["faithfulness"]
    assert "faithfulness" in lines[0] and old in lines[0]
    assert (out / "records.jsonl").read_bytes() == before  # nothing appended
    assert len(srv.calls()) == n_calls  # no work done
    ident = json.loads((out / "run.json").read_text())  # what the run was started with
    assert ident["metric_versions"] == first["metric_versions"]


def test_resume_of_a_run_started_under_other_metric_code_is_refused(tmp_path):
    out = tmp_path / "r"
    args = ["run", *_tiny(tmp_path), "tracking=none", "progress=off", f"hydra.run.dir={out}",
            f"cache_dir={tmp_path / 'c'}"]
    assert run_cli(*args, cwd=tmp_path).returncode == 0
    ident = json.loads((out / "run.json").read_text())
    current = ident["metric_versions"]["retrieval"]
    ident["metric_versions"]["retrieval"] = "0ld0ld0ld0ld"
    (out / "run.json").write_text(json.dumps(ident))
    before = (out / "records.jsonl").read_bytes()
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 3
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "retrieval" in lines[0] and "0ld0ld0ld0ld" in lines[0] and current in lines[0]
    assert (out / "records.jsonl").read_bytes() == before
    # the same versions resume fine
    ident["metric_versions"]["retrieval"] = current
    (out / "run.json").write_text(json.dumps(ident))
    assert run_cli(*args, cwd=tmp_path).returncode == 0


# -- 10: latency and cost --------------------------------------------------------------------

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
