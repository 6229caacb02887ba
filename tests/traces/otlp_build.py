"""Hand-built OTLP JSON, as the Collector's file exporter writes it: one
``ExportTraceServiceRequest`` a line, hex ids, ``AnyValue`` attributes (int64 as a string)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

T0 = 1_764_900_000_000_000_000  # 2025-12-05 02:00 UTC, in ns


def any_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [any_value(x) for x in v]}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": any_value(x)}
                                           for k, x in v.items()]}}
    return {"stringValue": str(v)}


def span(trace: int, sid: int, parent: int | None, name: str, attrs: dict[str, Any],
         start_ms: float = 0, end_ms: float | None = 10) -> dict[str, Any]:
    s: dict[str, Any] = {"traceId": f"{trace:032x}", "spanId": f"{sid:016x}",
                         "name": name, "kind": "SPAN_KIND_INTERNAL",
                         "startTimeUnixNano": str(T0 + int(start_ms * 1e6)),
                         "attributes": [{"key": k, "value": any_value(v)}
                                        for k, v in attrs.items()],
                         "status": {}}
    if parent is not None:
        s["parentSpanId"] = f"{parent:016x}"
    if end_ms is not None:
        s["endTimeUnixNano"] = str(T0 + int(end_ms * 1e6))
    return s


def request(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name",
                                     "value": {"stringValue": "my-rag"}}]},
        "scopeSpans": [{"scope": {"name": "openinference.instrumentation.langchain"},
                        "spans": spans}]}]}


def rag_trace(trace: int, question: str, answer: str, docs: list[tuple[str, str, float]],
              reranked: list[int] | None = None, case_id: str | None = None,
              start_ms: float = 0, session: str | None = "s-1") -> list[dict[str, Any]]:
    """An OpenInference RAG trace: root CHAIN (JSON output with ``answer``), RETRIEVER
    (``docs``: (doc id, text, score)), an optional RERANKER keeping ``reranked`` (indexes),
    LLM; the root last, as spans end; ``session``: its ``session.id`` (None: none)."""
    base = trace * 10
    root_attrs: dict[str, Any] = {
        "openinference.span.kind": "CHAIN", "input.value": question,
        "output.value": json.dumps({"answer": answer, "question": question}),
        "output.mime_type": "application/json", "user.id": "u-7"}
    if session is not None:
        root_attrs["session.id"] = session
    if case_id:
        root_attrs["raglab.case_id"] = case_id
    ret: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": question}
    for i, (doc_id, text, score) in enumerate(docs):
        ret[f"retrieval.documents.{i}.document.id"] = f"vec-{doc_id}"
        ret[f"retrieval.documents.{i}.document.content"] = text
        ret[f"retrieval.documents.{i}.document.score"] = score
        ret[f"retrieval.documents.{i}.document.metadata"] = json.dumps({"doc_id": doc_id})
    spans = [span(trace, base + 2, base + 1, "retriever", ret, start_ms + 1, start_ms + 4)]
    if reranked is not None:
        rr: dict[str, Any] = {"openinference.span.kind": "RERANKER"}
        for j, i in enumerate(reranked):
            doc_id, text, score = docs[i]
            rr[f"reranker.output_documents.{j}.document.content"] = text
            rr[f"reranker.output_documents.{j}.document.score"] = 1.0 - j / 10
            rr[f"reranker.output_documents.{j}.document.metadata"] = json.dumps(
                {"doc_id": doc_id})
        spans.append(span(trace, base + 3, base + 1, "reranker", rr, start_ms + 4,
                          start_ms + 5))
    spans.append(span(trace, base + 4, base + 1, "llm", {
        "openinference.span.kind": "LLM", "llm.model_name": "gpt-test",
        "llm.token_count.prompt": 120, "llm.token_count.completion": 9,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": answer}, start_ms + 5, start_ms + 9))
    spans.append(span(trace, base + 1, None, "rag", root_attrs, start_ms, start_ms + 10))
    return spans


def write_lines(path: Path, lines: list[Any]) -> Path:
    """Each item a line: a list of spans (one request), or a string written as it is."""
    with open(path, "w", encoding="utf-8") as fh:
        for item in lines:
            fh.write((item if isinstance(item, str) else json.dumps(request(item))) + "\n")
    return path
