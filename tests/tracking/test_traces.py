"""Each case of a run as an MLflow trace: real runs of the CLI on a sqlite store, read back
with MLflow's own client (``mlflow.search_traces``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from raglab.metrics.catalog import HEADLINE, spec_of
from raglab.tracking.assessments import feedback_name
from tests.conftest import run_cli

mlflow = pytest.importorskip("mlflow")

# end-to-end runs against a real MLflow store: in the slow suite
pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")]

REPO = Path(__file__).resolve().parents[2]
BASE = ["metrics.cutoffs=[1,3,5]", "k=3", "candidate_depth=5", "progress=off",
        "grader=heuristic", "dataset.labels=null"]


def _args(tmp_path: Path, tiny, *extra: str, run: str = "run") -> list[str]:
    corpus, cases = tiny
    return ["run", *BASE, f"dataset.corpus={corpus}", f"dataset.cases={cases}",
            f"hydra.run.dir={tmp_path / run}", f"cache_dir={tmp_path / 'cache'}",
            f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", *extra]


def _records(run_dir: Path) -> dict[str, dict]:
    rows = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines() if x]
    return {r["case_id"]: r for r in rows}


def _run_and_traces(tmp_path: Path, run: str = "run") -> tuple[object, list]:
    """The (only) MLflow run of the store and its traces, read with MLflow's client."""
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = mlflow.get_experiment_by_name("raglab")
    runs = mlflow.search_runs([exp.experiment_id], output_format="list")
    run_dir = str((tmp_path / run).absolute())
    (mine,) = [r for r in runs if r.data.tags.get("raglab.run_dir") == run_dir]
    traces = mlflow.search_traces(locations=[exp.experiment_id], run_id=mine.info.run_id,
                                  return_type="list")
    return mine, traces


def test_every_case_is_a_trace_with_spans_expectations_and_feedback(tmp_path, tiny):
    proc = run_cli(*_args(tmp_path, tiny), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "its cases, one trace each: http://127.0.0.1:5000/#/experiments/" in proc.stdout
    run, traces = _run_and_traces(tmp_path)
    check_traces(tmp_path / "run", Path(tiny[1]), run, traces)


def check_traces(run_dir: Path, cases_path: Path, run, traces: list) -> None:
    """The traces of a finished run, as read back with MLflow's client, against its
    records and cases: spans, expectations, feedback values and their sources."""
    records = _records(run_dir)
    versions = json.loads((run_dir / "metrics.json").read_text())["metric_versions"]
    assert run.info.status == "FINISHED"
    by_case = {t.info.tags["raglab.case_id"]: t for t in traces}
    assert sorted(by_case) == sorted(records) and len(traces) == len(records)
    named: set[str] = set()
    for case_id, t in by_case.items():
        rec = records[case_id]
        # the pairing keys of MLflow's comparison: the request, the client request id, the tag
        assert json.loads(t.info.request_preview)["case_id"] == case_id
        assert t.info.client_request_id == case_id
        assert t.info.tags["mlflow.eval.requestId"] == case_id
        assert t.info.trace_metadata["mlflow.sourceRun"] == run.info.run_id
        spans = {s.name: s for s in t.data.spans}
        assert spans["case"].span_type == "CHAIN"
        assert spans["case"].outputs == {"answer": rec["output"]["answer"]}
        lat = rec["output"]["latency_ms"]
        retr = spans["retrieve"]
        assert retr.span_type == "RETRIEVER" and retr.parent_id == spans["case"].span_id
        docs = retr.outputs
        assert [d["id"] for d in docs] == [h["doc_id"] for h in rec["output"]["candidates"]]
        assert [d["page_content"] for d in docs] == [h["text"] for h in rec["output"]["candidates"]]
        assert [d["metadata"]["score"] for d in docs] == \
            [h["score"] for h in rec["output"]["candidates"]]
        assert spans["rerank"].span_type == "RERANKER"
        assert [d["id"] for d in spans["assemble context"].outputs] == \
            [h["doc_id"] for h in rec["output"]["context"]]
        assert spans["generate"].span_type == "LLM"
        for name, stage in (("retrieve", "retrieve"), ("rerank", "rerank"),
                            ("generate", "generate"), ("case", "total")):
            s = spans[name]
            assert abs((s.end_time_ns - s.start_time_ns) / 1e6 - lat[stage]) < 1e-3, name
        assessments = t.info.assessments
        expect = {a.name: a for a in assessments if a.expectation is not None}
        feedback = {a.name: a for a in assessments if a.feedback is not None}
        case = next(c for c in map(json.loads, cases_path.read_text().splitlines())
                    if c["id"] == case_id)
        if case.get("reference_answer"):
            assert expect["expected_response"].value == case["reference_answer"]
            assert expect["expected_facts"].value == [n["text"] for n in case["nuggets"]]
            assert [e["doc_uri"] for e in expect["expected_retrieved_context"].value] == \
                [e["doc_id"] for e in case["evidence"]]
        assert all(a.source.source_type == "HUMAN" for a in expect.values())
        # one feedback per headline per-case metric that has a value, with its value, named
        # as the metric, but correctness: MLflow's UI keeps that name for its own judge
        # (a pass/fail check's value: True when the case passed it, whatever its direction)
        want = {("raglab.correctness" if m == "correctness" else m):
                (v == (1.0 if spec_of(m).higher_is_better else 0.0))
                if spec_of(m).kind == "binary" else v
                for m, v in rec["metrics"].items() if m in HEADLINE and v is not None}
        assert {n: a.value for n, a in feedback.items()} == pytest.approx(want)
        assert "correctness" not in feedback
        named |= feedback.keys()
        assert all(isinstance(a.value, bool if spec_of(n.removeprefix("raglab.")).kind ==
                              "binary" else float) for n, a in feedback.items())
        feedback = {n.removeprefix("raglab."): a for n, a in feedback.items()}
        for name, a in feedback.items():
            spec = spec_of(name)
            if spec.family == "retrieval":
                assert a.source.source_type == "CODE"
                assert a.source.source_id == f"raglab.retrieval@{versions['retrieval']}"
            elif any(v["family"] == spec.family for v in rec["verdicts"]):
                # the heuristic grader calls no model: code, named by grader and version
                assert a.source.source_type == "CODE"
                assert a.source.source_id == f"heuristic@{versions[spec.family]}"
                assert a.metadata["raglab.metric_version"] == versions[spec.family]
        evidence = [v for v in rec["verdicts"]
                    if v["family"] == "faithfulness" and v.get("evidence")]
        if "faithfulness" in feedback and evidence:
            assert evidence[0]["evidence"] in feedback["faithfulness"].rationale
    assert "raglab.correctness" in named


FLAKY_SYSTEM = """
from raglab.data.schema import SystemOutput
ROTA = 'Escalate payment incidents to the on-call lead via the PAY-ONCALL rota.'
class S:
    def answer(self, r):
        if r.case_id == 't-2':
            raise RuntimeError('the system is down')
        if r.case_id == 't-4':  # right: the evidence, the answer, its citation
            hit = {'doc_id': 'internal/c', 'text': ROTA, 'score': 1.0}
            return SystemOutput(case_id=r.case_id, answer=ROTA, candidates=[hit],
                                context=[hit], citations=[{'sentence': 0, 'context': [0]}])
        return SystemOutput(case_id=r.case_id, answer='It takes 5 business days.',
                            candidates=[{'doc_id': 'kb/b', 'score': 1.0}],
                            context=[{'doc_id': 'kb/b'}])
def make(opts):
    return S()
"""


def _python_system(tmp_path: Path, source: str) -> dict[str, str]:
    (tmp_path / "sut.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{REPO}"
    return env


def test_traces_failed_all_assessments_and_none(tmp_path, tiny):
    env = _python_system(tmp_path, FLAKY_SYSTEM)
    proc = run_cli(*_args(tmp_path, tiny, "tracking.traces=failed", "tracking.assessments=all",
                          "system=python", "system._target_=sut.make", run="failed"),
                   cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    records = _records(tmp_path / "failed")
    failed = {c for c, r in records.items() if r["error"] or r.get("diagnosis")}
    assert 0 < len(failed) < len(records)  # the tiny set has both kinds
    _, traces = _run_and_traces(tmp_path, "failed")
    assert sorted(t.info.tags["raglab.case_id"] for t in traces) == sorted(failed)
    for t in traces:
        rec = records[t.info.tags["raglab.case_id"]]
        feedback = {a.name for a in t.info.assessments if a.feedback is not None}
        assert feedback == {feedback_name(m) for m, v in rec["metrics"].items() if v is not None}
        # ERROR also for a case that failed a pass/fail check that is a harm or a missing
        # fact (never a green "Success"); a retrieval cutoff's share missed is not one
        failed_check = any(v is not None and spec_of(m).kind == "binary" and
                           v != (1.0 if spec_of(m).higher_is_better else 0.0) and
                           (spec_of(m).family != "retrieval" or not spec_of(m).higher_is_better)
                           for m, v in rec["metrics"].items())
        assert t.info.state.value == ("ERROR" if rec["error"] or failed_check else "OK")

    proc = run_cli(*_args(tmp_path, tiny, "tracking.traces=none", run="none"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run, traces = _run_and_traces(tmp_path, "none")
    assert run.info.status == "FINISHED" and traces == []


SLOW_SYSTEM = """
import time
from raglab.data.schema import SystemOutput
class S:
    def answer(self, r):
        time.sleep(2.0)
        return SystemOutput(case_id=r.case_id, answer='It takes 5 business days.',
                            candidates=[{'doc_id': 'kb/a', 'text': 'Refunds', 'score': 1.0}],
                            context=[{'doc_id': 'kb/a'}],
                            latency_ms={'retrieve': 1.0, 'generate': 2.0})
def make(opts):
    return S()
"""


def test_a_resumed_run_traces_each_case_once(tmp_path, tiny):
    """Killed (SIGKILL) after some cases are recorded and some traced, then resumed: every
    case has exactly one trace (the earlier process's, or one written on resume)."""
    # imported before the run starts: importing MLflow at the first look took, on a busy
    # machine, longer than the remaining cases (2 s each) and the kill came too late
    from mlflow.tracking import MlflowClient

    env = _python_system(tmp_path, SLOW_SYSTEM)
    args = _args(tmp_path, tiny, "system=python", "system._target_=sut.make", "concurrency=1")
    proc = subprocess.Popen([sys.executable, "-m", "raglab.cli", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    recs = tmp_path / "run" / "records.jsonl"
    db = tmp_path / "mlflow.db"
    try:
        deadline = time.monotonic() + 120
        traced = 0
        while time.monotonic() < deadline and proc.poll() is None:
            if recs.exists() and db.exists() and recs.read_text().count("\n") >= 2:
                client = MlflowClient(tracking_uri=f"sqlite:///{db}")
                exp = client.get_experiment_by_name("raglab")
                traced = len(client.search_traces(locations=[exp.experiment_id],
                                                  include_spans=False)) if exp else 0
                if traced:
                    break
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    n_before = recs.read_text().count("\n")
    assert traced >= 1 and n_before < 4, "the kill came too late to test a resume"
    resumed = subprocess.run([sys.executable, "-m", "raglab.cli", *args], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    run, traces = _run_and_traces(tmp_path)
    ids = sorted(t.info.tags["raglab.case_id"] for t in traces)
    assert ids == ["t-1", "t-2", "t-3", "t-4"]  # every case, none twice


def test_a_case_run_again_replaces_its_trace(tmp_path):
    """A resume runs a failed case again: its new trace replaces the old one (found by
    the case id tag of the run's traces), never adds a second."""
    from raglab.data.record import CaseRecord
    from raglab.tracking.mlflow_store import MlflowRun
    from raglab.tracking.traces import TraceWriter

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = MlflowRun.start(uri, "again", "r")

    def record(error):
        return CaseRecord.model_validate({
            "case_id": "c-1", "gold": {"answerable": True}, "error": error,
            "output": None if error else {"case_id": "c-1", "answer": "yes",
                                          "latency_ms": {"total": 2.0}},
            "metrics": {"error_rate": 1.0 if error else 0.0}})

    for rec in (record("system: down"), record(None)):
        writer = TraceWriter(uri, run.experiment_id, run.run_id, {}, {}, "none", False)
        writer.submit(rec)
        writer.close()
        assert writer.failures == 0
    mlflow.set_tracking_uri(uri)
    traces = mlflow.search_traces(locations=[run.experiment_id], run_id=run.run_id,
                                  return_type="list")
    assert [(t.info.tags["raglab.case_id"], t.info.state.value) for t in traces] == \
        [("c-1", "OK")]


def test_the_cases_address_opens_the_evaluation_view():
    from raglab.tracking.traces import traces_url

    assert traces_url("sqlite:///m.db", "3", "abc") == \
        "http://127.0.0.1:5000/#/experiments/3/runs/abc/traces?workflowType=genai"
    assert traces_url("http://srv:8080/", "3", "abc", compare_to="def").endswith(
        "/runs/abc/traces?workflowType=genai&compareToRunUuid=def")
    assert traces_url("http://srv:8080/", "3", "abc").startswith("http://srv:8080/#/")


def test_importing_the_traces_module_does_not_import_mlflow():
    code = ("import sys, raglab.tracking.traces, raglab.tracking.tracker; "
            "print('mlflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, check=True)
    assert out.stdout.strip() == "False"
