"""MLflow's span types read without a store (the plain data
raglab.tracking.mlflow_traces gives), and the replay's configurable keys."""

from __future__ import annotations

import json
from types import SimpleNamespace

from raglab.traces import problems as P
from raglab.traces.mapping import to_record
from raglab.traces.match import pair
from raglab.traces.source import from_mlflow, records
from tests.traces.otlp_build import T0, rag_trace, write_lines


def _span(sid, parent, name, kind, start, end, inputs=None, outputs=None, **attrs):
    return {"span_id": sid, "parent_id": parent, "name": name, "start_ns": T0 + start * 10**6,
            "end_ns": T0 + end * 10**6,
            "attrs": {"mlflow.spanType": kind, "mlflow.spanInputs": inputs,
                      "mlflow.spanOutputs": outputs, **attrs}}


def _docs(*ids):
    return [{"page_content": f"text of {i}", "metadata": {"doc_uri": f"kb/{i}",
                                                         "chunk_id": f"{i}-0"},
             "id": f"vec-{i}"} for i in ids]


def test_mlflow_span_types_map_to_an_output():
    trace = {"trace_id": "tr-1", "tags": {"raglab.case_id": "c9"},
             "metadata": {"mlflow.trace.user": "u1", "mlflow.trace.session": "s1"},
             "request_preview": json.dumps({"question": "How fast?"}),
             "response_preview": "{\"answer\": \"cut sho",
             "assessments": [{"name": "user_feedback", "value": False, "source": "HUMAN"}],
             "spans": [
                 _span("r", "", "agent", "AGENT", 0, 20),  # no inputs: the request preview
                 _span("a", "r", "search", "RETRIEVER", 1, 4, "How fast?", _docs(1, 2, 3)),
                 _span("b", "r", "rerank", "RERANKER", 4, 6, None, _docs(3, 1)),
                 _span("c", "r", "chat", "CHAT_MODEL", 6, 18, {"messages": []},
                       {"choices": [{"message": {"content": "Five days."}}]},
                       **{"mlflow.chat.tokenUsage": {"input_tokens": 50, "output_tokens": 4},
                          "mlflow.llm.model": "gpt-x"}),
                 _span("d", "c", "inner", "LLM", 7, 17, None, "Five days."),
             ]}
    rec = to_record(from_mlflow(trace, "mlflow://app"), doc_id_key="doc_uri")
    assert [h["doc_id"] for h in rec["candidates"]] == ["kb/1", "kb/2", "kb/3"]
    assert [h["doc_id"] for h in rec["context"]] == ["kb/3", "kb/1"]
    assert rec["candidates"][0]["metadata"] == {"chunk_id": "1-0"}
    assert rec["question"] == "How fast?"  # the preview, whole JSON
    assert rec["answer"] == "Five days."  # the preview is cut short: the model's output
    assert rec["model"] == "gpt-x" and rec["usage"] == {"input_tokens": 50.0,
                                                        "output_tokens": 4.0}
    # the LLM span inside the chat model span is not counted twice
    assert rec["latency_ms"] == {"retrieve": 3.0, "rerank": 2.0, "generate": 12.0,
                                 "total": 20.0}
    assert rec["case_id"] == "c9" and rec["user"] == {"id": "u1"}
    assert rec["session"] == "s1" and rec["feedback"] == "down"
    # without doc_id_key=doc_uri the documents' own ids are used
    rec = to_record(from_mlflow(trace, "mlflow://app"))
    assert [h["doc_id"] for h in rec["candidates"]] == ["vec-1", "vec-2", "vec-3"]


def test_replay_keys_are_configurable(tmp_path):
    from raglab.systems.base import SystemRequest
    from raglab.systems.replay import ReplaySystem, ReplaySystemCfg

    spans = rag_trace(1, "q?", "a", [("kb/a", "A.", 0.5)])
    root = spans[-1]
    root["attributes"].append({"key": "app.eval_case", "value": {"stringValue": "c1"}})
    for a in spans[0]["attributes"]:  # the corpus id under another metadata key
        if a["key"].endswith(".metadata"):
            a["value"]["stringValue"] = json.dumps({"corpus_id": "kb/x"})
    f = write_lines(tmp_path / "t.jsonl", [spans])
    dataset = SimpleNamespace(cases=[SimpleNamespace(id="c1", question="other?")])
    cfg = ReplaySystemCfg(name="replay", path=str(f), case_id_attribute="app.eval_case",
                          doc_id_key="corpus_id")
    system = ReplaySystem(cfg, SimpleNamespace(dataset=dataset, run=None))
    out = system.answer(SystemRequest("c1", "other?", {}, None))
    assert out["candidates"][0]["doc_id"] == "kb/x" and not system.warnings
    problems = P.Problems()  # with the defaults: no case id, no such question
    assert pair(records(f, problems), dataset.cases, problems).unmatched == [f"{1:032x}"]
