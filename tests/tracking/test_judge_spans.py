"""The judge's calls in each case's trace, and failed checks shown failed: a run graded by
a model behind a stand-in server (no network), traced to a real MLflow store on sqlite and
read back with MLflow's own client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from raglab.data.record import CaseRecord
from tests.conftest import write_jsonl
from tests.graders.fake_anthropic import TEST_KEY, FakeAnthropic, fake_model
from tests.graders.test_run_claude import _env
from tests.runner.test_resume_refuses_other_versions import _tiny

mlflow = pytest.importorskip("mlflow")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def _records(run_dir: Path) -> dict[str, dict]:
    rows = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines() if x]
    return {r["case_id"]: r for r in rows}


def _traces(uri: str, run_dir: Path) -> dict[str, object]:
    mlflow.set_tracking_uri(uri)
    exp = mlflow.get_experiment_by_name("raglab")
    runs = mlflow.search_runs([exp.experiment_id], output_format="list")
    (run,) = [r for r in runs if r.data.tags.get("raglab.run_dir") == str(run_dir.absolute())]
    traces = mlflow.search_traces(locations=[exp.experiment_id], run_id=run.info.run_id,
                                  return_type="list")
    return {t.info.tags["raglab.case_id"]: t for t in traces}


def _judges(trace) -> list:
    return sorted((s for s in trace.data.spans if s.span_type == "CHAT_MODEL"),
                  key=lambda s: (s.name, s.get_attribute("raglab.input_tokens")))


@pytest.mark.slow  # two CLI runs graded through a stand-in server: in the slow suite
def test_judge_calls_are_spans_of_each_case_and_a_leak_is_shown_failed(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with FakeAnthropic(handler=fake_model) as srv:
        env = _env(srv.url, TEST_KEY)
        base = [sys.executable, "-m", "raglab.cli", "run", *_tiny(tmp_path), "progress=off",
                "grader=claude", "system.enforce_acl=false", f"tracking.uri={uri}",
                f"cache_dir={tmp_path / 'cache'}"]
        for d in ("r1", "r2"):  # r2: the same run again, every judgment from the cache
            p = subprocess.run([*base, f"hydra.run.dir={tmp_path / d}"], env=env,
                               capture_output=True, text=True, timeout=300, cwd=tmp_path)
            assert p.returncode == 0, p.stderr[-3000:]
    versions = json.loads((tmp_path / "r1" / "metrics.json").read_text())["metric_versions"]
    first, again = _records(tmp_path / "r1"), _records(tmp_path / "r2")
    traced = {d: _traces(uri, tmp_path / d) for d in ("r1", "r2")}
    graded = [cid for cid, r in first.items() if r["graded"]]
    assert graded
    for cid in graded:
        calls = first[cid]["grading_calls"]
        assert calls and all(c["model"] and c["input_tokens"] > 0 and c["output_tokens"] > 0
                             and c["latency_ms"] > 0 and c["cost_usd"] > 0
                             and not c["cached"] and c["family"] in versions for c in calls)
        # the case's grading cost is its calls' costs, a shared call's by the case's share
        assert sum(c["cost_usd"] * c.get("share", 1) for c in calls) == \
            pytest.approx(first[cid]["grading_cost_usd"], rel=1e-6)
        # the cached re-run lists the same calls, each answered by raglab's cache
        assert [c["cached"] for c in again[cid]["grading_calls"]] == [True] * len(calls)
        assert again[cid]["grading_cost_usd"] == pytest.approx(first[cid]["grading_cost_usd"])
        for d, recs in (("r1", first), ("r2", again)):
            trace = traced[d][cid]
            spans = {s.span_id: s for s in trace.data.spans}
            judges = _judges(trace)
            assert len(judges) == len(recs[cid]["grading_calls"])
            want = sorted(recs[cid]["grading_calls"],
                          key=lambda c: ("judge " + c["family"], c["input_tokens"]))
            for s, c in zip(judges, want):
                assert spans[s.parent_id].name == "grade"
                assert spans[spans[s.parent_id].parent_id].name == "case"
                assert s.get_attribute("mlflow.llm.model") == c["model"]
                assert s.get_attribute("raglab.output_tokens") == c["output_tokens"]
                assert s.get_attribute("raglab.cost_usd") == pytest.approx(c["cost_usd"])
                assert s.get_attribute("raglab.latency_ms") == pytest.approx(c["latency_ms"])
                assert s.get_attribute("raglab.cached") is c["cached"]
                assert s.get_attribute("raglab.grader_version") == versions[c["family"]]
                assert s.get_attribute("raglab.share") == c.get("share")
                # MLflow's own usage (summed per trace) only for a call made for this case
                usage = s.get_attribute("mlflow.chat.tokenUsage")
                if c["cached"] or "share" in c:
                    assert usage is None and s.end_time_ns - s.start_time_ns == \
                        (0 if c["cached"] else round(c["latency_ms"] * 1e6))
                else:
                    cache = {k: c[k] for k in ("cache_read_input_tokens",
                                               "cache_creation_input_tokens") if c.get(k)}
                    assert usage == {"input_tokens": c["input_tokens"],
                                     "output_tokens": c["output_tokens"],
                                     "total_tokens": c["input_tokens"] + c["output_tokens"],
                                     **cache}
    # the customer's question reached the staff-only document: a leak, never green
    leak = first["t-3"]
    assert leak["metrics"]["acl_leak_rate"] == 1.0
    t = traced["r1"]["t-3"]
    fb = {a.name: a for a in t.info.assessments if a.feedback is not None}
    assert fb["acl_leak_rate"].value is False
    assert json.loads(fb["acl_leak_rate"].metadata["raglab.value"]) == 1.0
    assert "internal/c: rank 1 of the" in fb["acl_leak_rate"].rationale
    assert str(t.info.state) == "ERROR"
    root = next(s for s in t.data.spans if s.parent_id is None)
    assert "acl_leak_rate" in root.status.description
    # a case that passed its checks: True (green) for each check, and an OK trace
    ok = [cid for cid, r in first.items() if r["error"] is None and r["diagnosis"] is None]
    for cid in ok:
        fb = {a.name: a for a in traced["r1"][cid].info.assessments if a.feedback is not None}
        assert fb["acl_leak_rate"].value is True
        assert str(traced["r1"][cid].info.state) == "OK"


def _leaky(tmp_path: Path) -> CaseRecord:
    return CaseRecord.model_validate({
        "case_id": "c1", "gold": {"answerable": True}, "graded": True,
        "output": {"case_id": "c1", "answer": "x", "latency_ms": {"total": 5.0}},
        "severity_one": [{"severity": 1, "kind": "acl_leak", "stage": "context", "rank": 2,
                          "doc_id": "hr/pay"}],
        "metrics": {"acl_leak_rate": 1.0, "must_not_contain_rate": 0.0, "faithfulness": 0.5,
                    "secret_leak_rate": 1.0, "all_vital_present": 0.0},
        "grading_cost_usd": 0.003,
        "grading_calls": [
            {"model": "m1", "backend": "openai", "purpose": "grade", "input_tokens": 100,
             "output_tokens": 20, "cost_usd": 0.002, "latency_ms": 40.0, "cached": False,
             "family": "faithfulness"},
            {"model": "m1", "backend": "openai", "purpose": "grade", "input_tokens": 300,
             "output_tokens": 30, "cost_usd": 0.003, "latency_ms": 90.0, "cached": True,
             "family": "correctness", "share": 1 / 3, "served": 3}]})


@pytest.mark.slow  # a new sqlite store takes MLflow ~8 s to create: in the slow suite
def test_a_records_judge_calls_and_failed_checks_as_mlflow_stores_them(tmp_path):
    """Known answers, written by the trace writer to a real sqlite store and read back."""
    from raglab.tracking.traces import TraceWriter

    rec = _leaky(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    exp = client.create_experiment("x")
    run = client.create_run(exp)
    w = TraceWriter(uri, exp, run.info.run_id, {}, {"faithfulness": "v-f", "correctness": "v-c",
                                                     "retrieval": "v-r", "abstention": "v-a",
                                                     "nuggets": "v-n"},
                    "claude", True, assessments="all")
    w.submit(rec)
    w.close()
    assert w.written == 1 and w.failures == 0
    (t,) = mlflow.MlflowClient(uri).search_traces(locations=[exp], run_id=run.info.run_id)
    fb = {a.name: a for a in t.info.assessments if a.feedback is not None}
    # pass/fail checks as booleans, True = passed, whatever the metric's direction
    assert {n: fb[n].value for n in ("acl_leak_rate", "must_not_contain_rate",
                                     "secret_leak_rate", "all_vital_present")} == \
        {"acl_leak_rate": False, "must_not_contain_rate": True, "secret_leak_rate": False,
         "all_vital_present": False}
    assert fb["faithfulness"].value == 0.5  # a score stays a number
    assert fb["acl_leak_rate"].rationale.splitlines()[1] == "- hr/pay: rank 2 of the context"
    assert fb["secret_leak_rate"].rationale.startswith("FAILED: answers that reveal a secret")
    assert str(t.info.state) == "ERROR"
    spans = {s.name: s for s in t.data.spans}
    root = spans["case"]
    assert root.status.description == \
        "failed: acl_leak_rate, secret_leak_rate, all_vital_present"
    grade = spans["grade"]
    assert grade.parent_id == root.span_id
    # laid after the system's 5 ms: the fresh call's 40 ms; the cached one takes no time
    assert grade.start_time_ns - root.start_time_ns == 5_000_000
    assert grade.end_time_ns - grade.start_time_ns == 40_000_000
    assert root.end_time_ns - root.start_time_ns == 45_000_000
    fresh, shared = spans["judge faithfulness"], spans["judge correctness"]
    assert fresh.span_type == shared.span_type == "CHAT_MODEL"
    assert fresh.get_attribute("mlflow.chat.tokenUsage") == \
        {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}
    assert fresh.get_attribute("mlflow.llm.cost") == {"total_cost": 0.002}
    assert fresh.get_attribute("raglab.grader_version") == "v-f"
    assert shared.get_attribute("mlflow.chat.tokenUsage") is None
    assert shared.get_attribute("raglab.share") == pytest.approx(1 / 3)
    assert shared.get_attribute("raglab.served") == 3
    assert shared.get_attribute("raglab.cached") is True
    assert shared.get_attribute("raglab.latency_ms") == 90.0
    assert shared.get_attribute("mlflow.llm.model") == "m1"


def test_an_older_record_without_judge_calls_still_reads(tmp_path):
    line = {"case_id": "c1", "gold": {"answerable": True}, "metrics": {}}
    path = write_jsonl(tmp_path / "records.jsonl", [line])
    from raglab.data.record import read_records

    (rec,) = read_records(path)
    assert rec.grading_calls is None and "grading_calls" not in rec.to_json()


def test_a_trace_shows_judge_calls_and_failed_checks_failed(tmp_path):
    """The trace built from a record (no store): a leak is False (red) and the trace not
    OK; each judge call a CHAT_MODEL span under ``grade``."""
    from raglab.tracking.assessments import Assessor
    from raglab.tracking.traces import build_trace

    info, spans = build_trace(None, _leaky(tmp_path), "run-1", "1",
                              Assessor({"faithfulness": "v-f"}, "claude", True), "cases")
    fb = {a.name: a.value for a in info.assessments if a.feedback is not None}
    assert fb["acl_leak_rate"] is False and fb["must_not_contain_rate"] is True
    assert str(info.state) == "ERROR"
    by_name = {s.name: s for s in spans}
    judges = [s for s in spans if s.span_type == "CHAT_MODEL"]
    assert [s.name for s in judges] == ["judge faithfulness", "judge correctness"]
    assert all(s.parent_id == by_name["grade"].span_id for s in judges)
    assert judges[0].get_attribute("raglab.grader_version") == "v-f"
    assert judges[1].get_attribute("raglab.cached") is True


def test_the_meter_of_a_case_lists_the_calls_of_the_judgments_inside_it():
    from raglab.llm.cost import metering

    with metering() as case:
        with metering() as judgment:
            judgment.call({"model": "m", "cost_usd": 0.1, "cached": False})
        case.add(judgment.total())
        case.replay(judgment.calls)  # the same judgment again, from the cache
        case.replay([{"model": "m", "share": 0.5}], fresh=True)
    assert judgment.calls == [{"model": "m", "cost_usd": 0.1, "cached": False}]
    assert case.calls == [{"model": "m", "cost_usd": 0.1, "cached": False},
                          {"model": "m", "cost_usd": 0.1, "cached": True},
                          {"model": "m", "share": 0.5}]


def test_raglabs_own_pass_fail_assessments_are_not_read_as_user_feedback():
    from raglab.traces.source import from_mlflow

    ours = {"raglab.family": "retrieval"}
    t = {"trace_id": "tr-1", "spans": [], "assessments": [
        {"name": "acl_leak_rate", "value": False, "source": "CODE", "metadata": ours},
        {"name": "faithfulness", "value": True, "source": "LLM_JUDGE",
         "metadata": {"raglab.family": "faithfulness"}}]}
    assert "feedback" not in from_mlflow(t, "mlflow://1").info
    # an app's thumbs-down logged with mlflow.log_feedback's default source (CODE) is read
    t["assessments"].append({"name": "user_feedback", "value": False, "source": "CODE"})
    assert from_mlflow(t, "mlflow://1").info["feedback"] == "down"


def test_a_retrieval_cutoff_missed_is_not_a_failed_case():
    """A case with two gold passages misses all_evidence@1 however well it retrieves: a
    red False on that assessment, but not a failed case (trace state ERROR) as a leak is."""
    from raglab.metrics.catalog import spec_of
    from raglab.tracking.assessments import failed_checks, passed

    metrics = {"final.all_evidence@1": 0.0, "candidate.hit_rate@1": 0.0, "final.ndcg@5": 0.4,
               "acl_leak_rate": 1.0, "all_vital_present": 0.0, "false_answer_rate": 0.0,
               "secret_leak_rate": None}
    assert failed_checks(metrics) == ["acl_leak_rate", "all_vital_present"]
    assert passed(spec_of("final.all_evidence@1"), 0.0) is False
