"""OpenTelemetry GenAI conventions (hand-built spans through OpenTelemetry's SDK and OTLP
encoder), traces without content (opt-in in OTel: noted, never an error), and the pairing
of traces with cases for a replay (case-id attribute, else the exact question)."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace

from raglab.traces import problems as P
from raglab.traces.match import pair
from raglab.traces.source import records
from tests.traces.otlp_build import rag_trace, write_lines

DOCS = [("kb/a", "Refunds take 5 days.", 0.9), ("kb/b", "Shipping is free.", 0.5)]


def _hex(obj):
    if isinstance(obj, dict):
        return {k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId")
                and v else _hex(v) for k, v in obj.items()}
    return [_hex(x) for x in obj] if isinstance(obj, list) else obj


def _genai_file(path, content: bool):
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("my-app")
    with tracer.start_as_current_span("invoke_workflow rag") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_workflow")
        root.set_attribute("raglab.case_id", "case-7")
        root.set_attribute("gen_ai.conversation.id", "conv-1")
        with tracer.start_as_current_span("retrieval kb") as r:
            r.set_attribute("gen_ai.operation.name", "retrieval")
            r.set_attribute("gen_ai.data_source.id", "kb")
            if content:
                r.set_attribute("gen_ai.retrieval.query.text", "How fast are refunds?")
            r.set_attribute("gen_ai.retrieval.documents", json.dumps(
                [{"id": "kb/a", "score": 0.8, "content": "Refunds take 5 days."},
                 {"id": "kb/b", "score": 0.3, "content": "Shipping is free."}]))
        with tracer.start_as_current_span("chat gpt-test") as c:
            c.set_attribute("gen_ai.operation.name", "chat")
            c.set_attribute("gen_ai.request.model", "gpt-test")
            c.set_attribute("gen_ai.response.model", "gpt-test-2025")
            c.set_attribute("gen_ai.usage.input_tokens", 321)
            c.set_attribute("gen_ai.usage.output_tokens", 12)
            if content:
                c.set_attribute("gen_ai.input.messages", json.dumps([
                    {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
                    {"role": "user", "parts": [{"type": "text", "content": "Context..."}]}]))
                c.set_attribute("gen_ai.output.messages", json.dumps([
                    {"role": "assistant", "finish_reason": "stop",
                     "parts": [{"type": "text", "content": "Within 5 days."}]}]))
    body = _hex(MessageToDict(encode_spans(exporter.get_finished_spans())))
    path.write_text(json.dumps(body) + "\n")
    return path


def test_genai_spans_map_to_an_output(tmp_path):
    f = _genai_file(tmp_path / "genai.jsonl", content=True)
    problems = P.Problems()
    ((_, rec),) = list(records(f, problems))
    assert not problems.counts
    assert [(h["doc_id"], h["score"]) for h in rec["candidates"]] == [("kb/a", 0.8),
                                                                       ("kb/b", 0.3)]
    assert rec["context"] == rec["candidates"]
    assert rec["question"] == "How fast are refunds?"  # the retrieval's query text
    assert rec["answer"] == "Within 5 days."  # the model's output message
    assert rec["model"] == "gpt-test-2025"
    assert rec["usage"] == {"input_tokens": 321.0, "output_tokens": 12.0}
    assert rec["case_id"] == "case-7" and rec["session"] == "conv-1"
    assert set(rec["latency_ms"]) == {"retrieve", "generate", "total"}


def test_genai_spans_without_content_are_noted_not_errors(tmp_path):
    f = _genai_file(tmp_path / "genai.jsonl", content=False)
    problems = P.Problems()
    assert list(records(f, problems)) == []
    assert problems.counts == {P.NO_CONTENT: 1} and problems.bad == 0
    assert "no question and no answer" in problems.first[P.NO_CONTENT]


def test_traces_pair_with_cases_by_attribute_then_by_question(tmp_path):
    f = write_lines(tmp_path / "t.jsonl", [
        rag_trace(1, "What is asked?", "by attribute", DOCS, case_id="c2"),
        rag_trace(2, "How fast are refunds?", "by question", DOCS),
        rag_trace(3, "Same question?", "first of two", DOCS),
        rag_trace(4, "Same question?", "second of two", DOCS),
        rag_trace(5, "Same question?", "one too many", DOCS),
        rag_trace(6, "Nobody asked this?", "unmatched", DOCS),
        rag_trace(7, "Again?", "a second trace of c2", DOCS, case_id="c2")])
    cases = [SimpleNamespace(id=i, question=q) for i, q in [
        ("c1", "How fast are refunds?"), ("c2", "Something else?"),
        ("c3", "Same question?"), ("c4", "Same question?"), ("c5", "Never traced?")]]
    problems = P.Problems()
    got = pair(records(f, problems), cases, problems, str(f))
    assert {c: o["answer"] for c, o in got.outputs.items()} == {
        "c2": "by attribute", "c1": "by question", "c3": "first of two",
        "c4": "second of two"}
    assert got.outputs["c1"]["case_id"] == "c1"
    assert got.unmatched == [f"{6:032x}"]
    assert got.duplicates == [f"{5:032x}", f"{7:032x}"]
    warnings = got.warnings(str(f), problems)
    assert any("1 trace(s) matched no case" in w for w in warnings)
    assert any("2 trace(s) were second traces" in w for w in warnings)


def test_replay_from_traces_with_bad_ones_warns_by_kind(tmp_path):
    from raglab.systems.base import SystemRequest
    from raglab.systems.replay import ReplaySystem, ReplaySystemCfg

    f = write_lines(tmp_path / "t.jsonl", [
        rag_trace(1, "How fast are refunds?", "5 days.", DOCS, case_id="c1"),
        '{"broken',
        rag_trace(2, "orphaned?", "x", DOCS)[:1]])  # a retriever span alone: no root
    dataset = SimpleNamespace(cases=[SimpleNamespace(id="c1", question="q?")],
                              quarantined=[])
    system = ReplaySystem(ReplaySystemCfg(name="replay", path=str(f)),
                          SimpleNamespace(dataset=dataset, run=None))
    out = system.answer(SystemRequest("c1", "q?", {}, None))
    assert out["answer"] == "5 days." and out["candidates"][0]["doc_id"] == "kb/a"
    (w,) = system.warnings
    assert "2 bad trace(s) not used (malformed line: 1, no root span: 1)" in w
    assert f"{f}:2: malformed line" in w and f"{f}:3 trace {2:032x}: no root span" in w
