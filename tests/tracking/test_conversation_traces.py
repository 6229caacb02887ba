"""A conversation run's traces in MLflow: each turn's trace carries its conversation as the
session (``mlflow.trace.session``) and its user (``mlflow.trace.user``), so MLflow groups
the turns of a conversation, and its turns start in turn order; read back from a real sqlite
store with MLflow's client."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli, write_jsonl
from tests.conversations.conftest import CONVERSATIONS, CORPUS

mlflow = pytest.importorskip("mlflow")

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")]


def conversation_run(tmp_path: Path, *extra: str) -> tuple[str, str]:
    """A run of the reference system (or as ``extra`` says) over three conversations (7
    turns) logged to a sqlite store: ``(tracking uri, experiment id)``."""
    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    cases = write_jsonl(tmp_path / "conversations.jsonl", CONVERSATIONS)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    r = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                "dataset.labels=null", "grader=heuristic", "progress=off",
                f"tracking.uri={uri}", f"hydra.run.dir={tmp_path / 'run'}",
                f"cache_dir={tmp_path / 'c'}", *extra, cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    mlflow.set_tracking_uri(uri)
    return uri, mlflow.get_experiment_by_name("raglab").experiment_id


def test_the_turns_of_a_conversation_are_one_mlflow_session(tmp_path):
    # replayed outputs whose later turns took longer: a trace that started at "now less its
    # latency" would put conv-1.t3 before conv-1.t1
    turns = [(c["id"], k) for c in CONVERSATIONS for k in range(1, len(c["turns"]) + 1)]
    outputs = write_jsonl(tmp_path / "outputs.jsonl", [
        {"case_id": f"{conv}.t{k}", "answer": "I do not know.", "candidates": [],
         "context": [], "latency_ms": {"total": 2000.0 * k}} for conv, k in turns])
    _, exp = conversation_run(tmp_path, "system=replay", f"system.path={outputs}")
    traces = mlflow.search_traces(locations=[exp], return_type="list")
    assert len(traces) == 7
    meta = {t.info.tags["raglab.case_id"]: t.info.trace_metadata for t in traces}
    assert {k: m.get("mlflow.trace.session") for k, m in meta.items()} == {
        "conv-1.t1": "conv-1", "conv-1.t2": "conv-1", "conv-1.t3": "conv-1",
        "conv-2.t1": "conv-2", "conv-2.t2": "conv-2", "conv-3.t1": "conv-3",
        "conv-3.t2": "conv-3"}
    assert {k: m.get("mlflow.trace.user") for k, m in meta.items()} == {
        "conv-1.t1": "u1", "conv-1.t2": "u1", "conv-1.t3": "u1", "conv-2.t1": None,
        "conv-2.t2": None, "conv-3.t1": "u3", "conv-3.t2": "u3"}
    one = mlflow.search_traces(locations=[exp], return_type="list",
                               filter_string="metadata.`mlflow.trace.session` = 'conv-1'")
    assert sorted(t.info.tags["raglab.case_id"] for t in one) == [
        "conv-1.t1", "conv-1.t2", "conv-1.t3"]
    sessions = mlflow.search_sessions(locations=[exp])
    assert sorted(len(s) for s in sessions) == [2, 2, 3]
    # a session's traces start in turn order, whatever order the turns finished in
    starts = {t.info.tags["raglab.case_id"]: t.info.request_time for t in traces}
    for conv, n in (("conv-1", 3), ("conv-2", 2), ("conv-3", 2)):
        times = [starts[f"{conv}.t{k}"] for k in range(1, n + 1)]
        assert times == sorted(set(times)), (conv, times)
