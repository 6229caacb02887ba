"""Traces with a session id replayed as conversations: a session's traces, by start time,
are the turns of one conversation (named by the session id, else by its first question),
and a trace whose question is not its turn's is counted and not used."""

from __future__ import annotations

import json

import pytest

from raglab.data.dataset import load_cases
from raglab.traces import problems as P
from raglab.traces.match import pair
from raglab.traces.source import records
from tests.conftest import run_cli, write_jsonl
from tests.conversations.conftest import CONVERSATIONS, CORPUS
from tests.traces.otlp_build import rag_trace, write_lines

TEXT = {d["doc_id"]: d["text"] for d in CORPUS}
#: the doc each turn retrieves and the answer the app gave, per conversation
ANSWERS = {
    "conv-1": [("kb/refunds", "Within 5 business days."),
               ("kb/refunds", "The refund fee is waived for Pro plans."),
               ("kb/exports", "I cannot share that.")],
    "conv-2": [("kb/exports", "Nightly at 02:00 UTC."),
               ("kb/exports", "They stay downloadable for 30 days.")],
    "conv-3": [("kb/refunds", "Within 5 business days."),
               ("internal/escalation", "The on-call lead, via the PAY-ONCALL rota.")],
}


@pytest.fixture
def convs(tmp_path):
    return (write_jsonl(tmp_path / "corpus.jsonl", CORPUS),
            write_jsonl(tmp_path / "conversations.jsonl", CONVERSATIONS))


def _trace_lines(sessions: dict[str, str], questions: dict[str, list[str]] | None = None):
    """One trace a line for each turn of each conversation, in session ``sessions[conv]``,
    turn k starting at k seconds (conv-3's traces first and in reverse order: the file's
    order is not the turns'; its last turn asks what conv-1's last turn asks)."""
    lines, n = [], 0
    for conv in ("conv-3", "conv-1", "conv-2"):
        turns = next(c["turns"] for c in CONVERSATIONS if c["id"] == conv)
        items = list(enumerate(turns, start=1))
        if conv == "conv-3":
            items.reverse()
        for k, turn in items:
            n += 1
            doc, answer = ANSWERS[conv][k - 1]
            q = (questions or {}).get(conv, [])[k - 1:k] or [turn["question"]]
            lines.append(rag_trace(n, q[0], answer, [(doc, TEXT[doc], 0.9)],
                                   start_ms=1000 * k, session=sessions[conv]))
    return lines


def test_a_replay_of_session_traces_scores_each_turn(tmp_path, convs):
    corpus, cases = convs
    # conv-1 and conv-3 by their own id as the session id; conv-2's session by its question
    traces = write_lines(tmp_path / "traces.jsonl", _trace_lines(
        {"conv-1": "conv-1", "conv-2": "b7f0c2", "conv-3": "conv-3"}))
    r = run_cli("run", "system=replay", f"system.path={traces}", f"dataset.corpus={corpus}",
                f"dataset.cases={cases}", "dataset.labels=null", "tracking=none",
                "grader=heuristic", f"hydra.run.dir={tmp_path / 'run'}",
                f"cache_dir={tmp_path / 'c'}", "progress=off", cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    recs = {json.loads(x)["case_id"]: json.loads(x)
            for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()}
    assert sorted(recs) == ["conv-1.t1", "conv-1.t2", "conv-1.t3", "conv-2.t1", "conv-2.t2",
                            "conv-3.t1", "conv-3.t2"]
    for conv, turns in ANSWERS.items():
        for k, (doc, answer) in enumerate(turns, start=1):
            rec = recs[f"{conv}.t{k}"]
            assert rec["error"] is None, rec["error"]
            assert rec["output"]["answer"] == answer, (conv, k)
            assert [h["doc_id"] for h in rec["output"]["candidates"]] == [doc]
            assert rec["tags"]["conversation"] == conv and rec["tags"]["turn"] == str(k)
    # the same question at conv-1's and conv-3's last turn: each got its own session's trace
    assert recs["conv-3.t2"]["metrics"]["final.evidence_recall"] == 1.0
    assert recs["conv-1.t3"]["output"]["answer"] == "I cannot share that."
    assert "matched no case" not in r.stderr and "second traces" not in r.stderr


def test_a_trace_that_asks_another_question_than_its_turn_is_not_used(tmp_path, convs):
    _, cases_file = convs
    cases, _ = load_cases(cases_file)
    lines = _trace_lines({"conv-1": "conv-1", "conv-2": "conv-2", "conv-3": "conv-3"},
                         {"conv-2": ["When do exports run?", "How big can an export be?"]})
    lines.append(rag_trace(99, "Anything else?", "No.", [("kb/exports", "x", 0.5)],
                           start_ms=9000, session="conv-2"))  # past conv-2's last turn
    f = write_lines(tmp_path / "traces.jsonl", lines)
    problems = P.Problems()
    got = pair(records(f, problems), cases, problems, str(f))
    assert "conv-2.t2" not in got.outputs and "conv-2.t1" in got.outputs
    assert len(got.outputs) == 6 and problems.counts == {P.TURN_QUESTION: 1}
    assert got.unmatched == [f"{99:032x}"]
    warning = "\n".join(got.warnings(str(f), problems))
    assert ("trace 2 asks 'How big can an export be?', turn conv-2.t2 asks 'And for how long "
            "can I get them afterwards?'") in warning
    assert "turn question differs: 1" in warning


def test_without_conversations_a_session_id_plays_no_part(tmp_path):
    """Single-turn cases: traces of one session pair by their question, as before."""
    from types import SimpleNamespace

    cases = [SimpleNamespace(id="a", question="Q1?"), SimpleNamespace(id="b", question="Q2?")]
    f = write_lines(tmp_path / "t.jsonl", [
        rag_trace(1, "Q2?", "A2.", [("kb/a", "x", 0.5)], start_ms=0, session="s"),
        rag_trace(2, "Q1?", "A1.", [("kb/a", "x", 0.5)], start_ms=5, session="s")])
    problems = P.Problems()
    got = pair(records(f, problems), cases, problems, str(f))
    assert {k: v["answer"] for k, v in got.outputs.items()} == {"a": "A1.", "b": "A2."}


@pytest.mark.slow  # a real MLflow store and a replay through the CLI
def test_mlflow_traces_of_a_session_are_replayed_as_a_conversation(tmp_path, convs,
                                                                   monkeypatch):
    """An app traced by MLflow (a sqlite store) that names each request's session with
    ``mlflow.trace.session`` metadata (``update_current_trace``); sessions not named after
    the conversations: paired by their first question."""
    import mlflow
    from mlflow.tracking import fluent

    corpus, cases = convs
    uri = f"sqlite:///{tmp_path / 'app.db'}"
    mlflow.set_tracking_uri(uri)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)  # (set_experiment sets it)
    mlflow.set_experiment("chat-app")

    @mlflow.trace(span_type="RETRIEVER")
    def search(query, doc):
        return [{"page_content": TEXT[doc], "metadata": {"doc_id": doc}}]

    @mlflow.trace
    def chat(question, session, doc, answer):
        mlflow.update_current_trace(metadata={"mlflow.trace.session": session})
        search(question, doc)
        return {"answer": answer}

    try:  # conv-3 first: its last turn asks what conv-1's last turn asks
        for i, conv in enumerate(reversed(CONVERSATIONS)):
            for k, turn in enumerate(conv["turns"], start=1):
                doc, answer = ANSWERS[conv["id"]][k - 1]
                chat(turn["question"], f"web-{i}", doc, answer)
        mlflow.flush_trace_async_logging()
    finally:
        fluent._active_experiment_id = None
        monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)
    r = run_cli("run", "system=replay", "system.path=mlflow://chat-app",
                f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null",
                "tracking=none", "grader=heuristic", f"hydra.run.dir={tmp_path / 'run'}",
                f"cache_dir={tmp_path / 'c'}", "progress=off", cwd=tmp_path,
                env={"MLFLOW_TRACKING_URI": uri})
    assert r.returncode in (0, 1), r.stderr
    recs = {json.loads(x)["case_id"]: json.loads(x)
            for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()}
    for conv, turns in ANSWERS.items():
        for k, (_, answer) in enumerate(turns, start=1):
            assert recs[f"{conv}.t{k}"]["output"]["answer"] == answer, (conv, k)
    assert "matched no case" not in r.stderr and "second traces" not in r.stderr
