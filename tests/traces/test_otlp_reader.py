"""OTLP JSON read as the Collector writes it, and each kind of bad trace (issue 33 item 3):
counted by kind, the first of each shown with its file, line and trace id, the rest read."""

from __future__ import annotations

import base64
import json

import pytest

from raglab.traces import problems as P
from raglab.traces.otlp import MAX_SPANS
from raglab.traces.source import detect, records
from tests.conftest import run_cli
from tests.traces.otlp_build import rag_trace, request, span, write_lines

DOCS = [("kb/a", "Refunds take 5 days.", 0.9), ("kb/b", "Shipping is free.", 0.5),
        ("kb/c", "Fees are waived.", 0.2)]


def _read(path):
    problems = P.Problems()
    return [r for _, r in records(path, problems)], problems


def test_the_mapping_of_an_openinference_trace(tmp_path):
    f = write_lines(tmp_path / "t.jsonl", [rag_trace(1, "How fast?", "5 days.", DOCS,
                                                     reranked=[2, 0])])
    assert detect(f) == "otlp"
    (rec,), problems = _read(f)
    assert not problems.counts
    assert [h["doc_id"] for h in rec["candidates"]] == ["kb/a", "kb/b", "kb/c"]  # rank order
    assert [h["score"] for h in rec["candidates"]] == [0.9, 0.5, 0.2]
    assert [h["doc_id"] for h in rec["context"]] == ["kb/c", "kb/a"]  # the reranker's output
    assert rec["answer"] == "5 days." and rec["question"] == "How fast?"
    assert rec["model"] == "gpt-test"
    assert rec["usage"] == {"input_tokens": 120.0, "output_tokens": 9.0}
    assert rec["latency_ms"] == {"retrieve": 3.0, "rerank": 1.0, "generate": 4.0, "total": 10.0}
    assert rec["user"] == {"id": "u-7"} and rec["session"] == "s-1"
    assert rec["trace_id"] == f"{1:032x}" and rec["case_id"] is None
    assert rec["timestamp"].startswith("2025-12-05T02:00:00")


def test_a_trace_over_several_lines_base64_ids_and_one_json_document(tmp_path):
    a, b = rag_trace(1, "q1?", "a1", DOCS), rag_trace(2, "q2?", "a2", DOCS)
    # the Collector writes batches: spans of two traces interleave over lines
    f = write_lines(tmp_path / "t.jsonl", [[a[0], b[0]], [a[1]], [b[1], a[2]], [b[2]]])
    recs, problems = _read(f)
    assert [r["question"] for r in recs] == ["q1?", "q2?"] and not problems.counts

    def b64(s):  # protobuf's own JSON mapping writes bytes as base64
        s = dict(s)
        for k in ("traceId", "spanId", "parentSpanId"):
            if k in s:
                s[k] = base64.b64encode(bytes.fromhex(s[k])).decode()
        return s
    g = write_lines(tmp_path / "b64.jsonl", [[b64(s) for s in a]])
    (rec,), _ = _read(g)
    assert rec["trace_id"] == f"{1:032x}" and len(rec["candidates"]) == 3
    doc = tmp_path / "doc.json"  # one pretty-printed document, a list of two requests
    doc.write_text(json.dumps([request(a), request(b)], indent=2))
    assert detect(doc) == "otlp"
    recs, problems = _read(doc)
    assert [r["answer"] for r in recs] == ["a1", "a2"] and not problems.counts


def test_raglab_json_lines_are_not_taken_for_traces(tmp_path):
    f = tmp_path / "traffic.jsonl"
    f.write_text(json.dumps({"question": "q", "answer": "resourceSpans", "timestamp":
                             "2025-01-01T00:00:00Z"}) + "\n")
    assert detect(f) == "jsonl"


def _bad_file(tmp_path):
    big = "x" * (10 * 1024 * 1024)  # a 10 MB attribute value
    many = [span(6, 600_000 + i, 60, "step", {"openinference.span.kind": "CHAIN"})
            for i in range(100_000)]  # 100,000 spans in one trace
    lines = [
        rag_trace(1, "good one?", "yes", DOCS),                                    # 1
        [span(2, 20, 99, "orphan", {"openinference.span.kind": "CHAIN"})],         # 2
        [span(3, 30, None, "root", {}), span(3, 31, 32, "a", {}),                  # 3
         span(3, 32, 31, "b", {})],
        [span(4, 40, None, "root", {"input.value": "q"}, end_ms=None)],            # 4
        [span(5, 50, None, "root", {"input.value": big})],                         # 5
        *[many[i:i + 20_000] for i in range(0, 100_000, 20_000)],                  # 6-10
        [span(6, 60, None, "root", {})],                                           # 11
        '{"resourceSpans": [ this is not JSON',                                    # 12
        [span(7, 70, None, "root", {"openinference.span.kind": "CHAIN",            # 13
                                    "input.value": "q", "output.value": "a"}),
         span(7, 71, 70, "llm", {"openinference.span.kind": "LLM"})],
        [span(8, 80, 81, "orphan", {})],                                           # 14
        rag_trace(9, "good two?", "yes", DOCS),                                    # 15
    ]
    return write_lines(tmp_path / "bad.jsonl", lines)


def test_each_kind_of_bad_trace_is_counted_and_the_rest_read(tmp_path):
    f = _bad_file(tmp_path)
    recs, problems = _read(f)
    assert [r["question"] for r in recs] == ["good one?", "good two?"]
    assert problems.counts == {P.NO_ROOT: 2, P.CYCLE: 1, P.NO_END: 1, P.TOO_LARGE: 1,
                               P.TOO_MANY: 1, P.MALFORMED: 1, P.NO_RETRIEVER: 1}
    first = problems.first
    assert first[P.NO_ROOT].startswith(f"{f}:2 trace {2:032x}: no root span")
    assert first[P.CYCLE].startswith(f"{f}:3 trace {3:032x}: ")
    assert first[P.NO_END].startswith(f"{f}:4 trace {4:032x}: ")
    assert first[P.TOO_LARGE].startswith(f"{f}:5 trace {5:032x}: ")
    assert "10,485,760 characters" in first[P.TOO_LARGE]
    assert first[P.TOO_MANY].startswith(f"{f}:6 trace {6:032x}: ")
    assert f"more than {MAX_SPANS:,} spans" in first[P.TOO_MANY]
    assert first[P.MALFORMED].startswith(f"{f}:12: malformed line")
    assert first[P.NO_RETRIEVER].startswith(f"{f}:13 trace {7:032x}: ")


def test_monitor_shows_the_first_bad_trace_of_each_kind(tmp_path):
    good = [rag_trace(100 + i, f"question {i}?", "Refunds take 5 days.", DOCS,
                      start_ms=i * 1000) for i in range(3)]
    f = write_lines(tmp_path / "t.jsonl", [
        *good, [span(2, 20, 99, "orphan", {})], [span(8, 80, 81, "orphan", {})],
        "not json at all", [span(4, 40, None, "root", {}, end_ms=None)]])
    out = run_cli("monitor", str(f), "tracking=none", "grader=heuristic",
                  "monitor.sample_rate=1", f"hydra.run.dir={tmp_path / 'mon'}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "3 lines in 1 window(s)" in out.stdout
    assert ("bad traces: 4 (not used): malformed line 1, no root span 2, missing end time 1"
            in out.stdout)
    for where in (f"{f}:4 trace {2:032x}: no root span", f"{f}:6: malformed line",
                  f"{f}:7 trace {4:032x}: missing end time"):
        assert f"  first: {where}" in out.stdout
    doc = json.loads((tmp_path / "mon" / "monitor.json").read_text())
    assert doc["bad_lines"] == 4 and doc["bad_by_kind"][P.NO_ROOT] == 2


@pytest.mark.parametrize("fmt, otlp", [("jsonl", True), ("otlp", False), ("bogus", True)])
def test_monitor_format_option(tmp_path, fmt, otlp):
    f = tmp_path / "t.jsonl"
    if otlp:
        write_lines(f, [rag_trace(1, "q?", "a", DOCS)])
    else:
        f.write_text(json.dumps({"question": "q?", "answer": "a", "timestamp":
                                 "2025-01-01T00:00:00Z"}) + "\n")
    out = run_cli("monitor", str(f), "--format", fmt, "tracking=none", "grader=heuristic",
                  f"hydra.run.dir={tmp_path / 'mon'}", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    if fmt == "otlp":  # JSON Lines read as traces: every line malformed
        assert "no usable traffic line (1 bad; first:" in out.stderr
        assert f"{f}:1: malformed line (not an OTLP ExportTraceServiceRequest" in out.stderr


def test_a_missing_mlflow_store_or_experiment_is_one_line(tmp_path):
    out = run_cli("monitor", "mlflow://my-app", "tracking=none", cwd=tmp_path,
                  env={"MLFLOW_TRACKING_URI": "sqlite:///app.db"})
    assert out.returncode == 2 and not (tmp_path / "app.db").exists()
    assert out.stderr == ("raglab: error: mlflow://my-app: no MLflow store at "
                          "sqlite:///app.db (set tracking.uri or MLFLOW_TRACKING_URI)\n")


def test_a_torn_first_line_is_one_malformed_line_not_a_document(tmp_path):
    f = write_lines(tmp_path / "t.jsonl", ['{"resourceSpans": [{"scopeSpans": [',
                                           rag_trace(1, "q1?", "a", DOCS),
                                           rag_trace(2, "q2?", "a", DOCS)])
    assert detect(f) == "otlp"
    recs, problems = _read(f)
    assert [r["question"] for r in recs] == ["q1?", "q2?"]
    assert problems.counts == {P.MALFORMED: 1} and f"{f}:1: malformed" in problems.first[
        P.MALFORMED]
