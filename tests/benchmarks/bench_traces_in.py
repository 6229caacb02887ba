"""Benchmark: reading traces (OTLP JSON, OpenInference attributes: docs/traces.md).

    python -m tests.benchmarks traces_in [--traces 100000] [--sizes-mb 20,200]

- ``cpu``: ``--traces`` traces of 6 spans each (a chain root, a retriever with 5
  documents of about 700 characters, an embedding, a reranker keeping 3, a prompt, a model
  call: :func:`trace_line`), one ``ExportTraceServiceRequest`` a line as the Collector's
  file exporter writes them: the CPU time of :func:`raglab.traces.source.records`
  (read, group by trace id, map each trace to an output) against ``json.loads`` over the
  same lines. Target: at most 2x.
- ``memory``: the peak RSS of a process reading trace files of ``--sizes-mb`` (each read
  to the end, nothing kept). Target: the same peak whatever the size (the largest within
  1.2x the smallest).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from tests.benchmarks.common import load, python, timed_process, verdict
from tests.traces.otlp_build import request, span

TARGET_CPU = 2.0
TARGET_MEMORY = 1.2
WORDS = ("refund policy annual plan monthly billing renewal proration invoice card bank "
         "transfer support ticket escalation").split()


def _text(i: int, n: int) -> str:
    return " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(n))


def trace_line(t: int) -> str:
    """One trace of 6 spans, as one OTLP JSON line, with the attributes OpenInference's
    LangChain instrumentor records (tests/traces/test_instrumented.py): documents of 100
    words (about 700 characters, a common chunk size), in the retriever's
    ``retrieval.documents.*`` and its ``output.value``, in the reranker's input and output
    documents, in the prompt and in the root's output."""
    q = f"question {t}: " + _text(t, 8)
    base = t * 10
    docs = [{"doc_id": f"kb/{(t + i) % 5000}", "text": _text(t + i, 100)} for i in range(5)]
    kept = [docs[2], docs[0], docs[1]]
    answer = _text(t, 25)
    prompt = "Answer from the context only.\n\n" + "\n\n".join(
        d["text"] for d in kept) + f"\n\nQuestion: {q}"
    as_json = [{"metadata": {"doc_id": d["doc_id"]}, "page_content": d["text"],
                "type": "Document"} for d in docs]
    ret = {"openinference.span.kind": "RETRIEVER", "input.value": q,
           "output.value": json.dumps({"documents": as_json}),
           "output.mime_type": "application/json",
           "metadata": json.dumps({"ls_retriever_name": "vectorstore"})}
    rr = {"openinference.span.kind": "RERANKER", "reranker.query": q,
          "reranker.model_name": "cross-encoder", "reranker.top_k": 3}
    for i, d in enumerate(docs):
        meta = json.dumps({"doc_id": d["doc_id"]})
        ret[f"retrieval.documents.{i}.document.content"] = d["text"]
        ret[f"retrieval.documents.{i}.document.score"] = 1.0 / (i + 1)
        ret[f"retrieval.documents.{i}.document.metadata"] = meta
        rr[f"reranker.input_documents.{i}.document.content"] = d["text"]
        rr[f"reranker.input_documents.{i}.document.metadata"] = meta
    for i, d in enumerate(kept):
        rr[f"reranker.output_documents.{i}.document.content"] = d["text"]
        rr[f"reranker.output_documents.{i}.document.score"] = 0.9 - i / 10
        rr[f"reranker.output_documents.{i}.document.metadata"] = json.dumps(
            {"doc_id": d["doc_id"]})
    spans = [
        span(t, base + 3, base + 2, "embed", {"openinference.span.kind": "EMBEDDING",
                                              "embedding.model_name": "mini",
                                              "embedding.embeddings.0.embedding.text": q},
             1, 2),
        span(t, base + 2, base + 1, "retriever", ret, 1, 4),
        span(t, base + 4, base + 1, "reranker", rr, 4, 5),
        span(t, base + 5, base + 1, "prompt", {
            "openinference.span.kind": "CHAIN", "input.value": json.dumps(
                {"context": [as_json[i] for i in (2, 0, 1)], "question": q}),
            "input.mime_type": "application/json", "output.value": prompt}, 5, 6),
        span(t, base + 6, base + 1, "llm", {
            "openinference.span.kind": "LLM", "llm.model_name": "gpt-test",
            "llm.invocation_parameters": json.dumps({"temperature": 0}),
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": prompt,
            "llm.token_count.prompt": 900, "llm.token_count.completion": 40,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": answer}, 6, 9),
        span(t, base + 1, None, "rag", {
            "openinference.span.kind": "CHAIN", "input.value": q,
            "output.value": json.dumps({"question": q, "answer": answer}),
            "output.mime_type": "application/json", "user.id": f"u{t % 97}",
            "session.id": f"s{t % 1000}"}, 0, 10),
    ]
    return json.dumps(request(spans))


def write_traces(path: Path, n: int | None = None, mb: float | None = None) -> int:
    """``n`` traces (or traces up to ``mb`` megabytes); the number written."""
    written, size = 0, 0
    with open(path, "w", encoding="utf-8") as fh:
        while (n is not None and written < n) or (mb is not None and size < mb * 1e6):
            line = trace_line(written) + "\n"
            fh.write(line)
            written += 1
            size += len(line)
    return written


READ = ("import sys\nfrom raglab.traces.problems import Problems\n"
        "from raglab.traces.source import records\n"
        "p = Problems(); n = sum(1 for _ in records(sys.argv[1], p))\n"
        "assert n and not p.counts, p.counts\nprint(n)\n")


def cpu(n: int) -> None:
    from raglab.traces.problems import Problems
    from raglab.traces.source import records

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "traces.jsonl"
        write_traces(path, n)
        mb = path.stat().st_size / 1e6
        best = {"json.loads": float("inf"), "raglab.traces": float("inf")}
        for _ in range(3):
            t0 = time.process_time()
            with open(path, "rb") as fh:
                count = sum(1 for line in fh if json.loads(line))
            best["json.loads"] = min(best["json.loads"], time.process_time() - t0)
            t0 = time.process_time()
            problems = Problems()
            got = sum(1 for _ in records(path, problems))
            best["raglab.traces"] = min(best["raglab.traces"], time.process_time() - t0)
            assert got == count == n and not problems.counts, problems.counts
    ratio = best["raglab.traces"] / best["json.loads"]
    print(f"  cpu: {n:,} traces x 6 spans ({mb:.0f} MB): json.loads {best['json.loads']:.2f} s, "
          f"read + mapped {best['raglab.traces']:.2f} s ({best['raglab.traces'] / n * 1e6:.0f} "
          f"us a trace): {ratio:.2f}x (target: at most {TARGET_CPU:g}x) "
          f"[{verdict(ratio <= TARGET_CPU)}]", flush=True)


def memory(sizes_mb: list[float]) -> None:
    peaks = []
    with tempfile.TemporaryDirectory() as d:
        for mb in sizes_mb:
            path = Path(d) / f"traces-{mb:g}.jsonl"
            n = write_traces(path, mb=mb)
            r = timed_process([python(), "-c", READ, str(path)])
            peaks.append(r["rss_mib"])
            print(f"  memory: {path.stat().st_size / 1e6:.0f} MB, {n:,} traces: peak RSS "
                  f"{r['rss_mib']:.0f} MiB, CPU {r['cpu']:.1f} s", flush=True)
            path.unlink()
    ratio = max(peaks) / min(peaks)
    print(f"  memory: the largest file's peak is {ratio:.2f}x the smallest's (target: at "
          f"most {TARGET_MEMORY:g}x) [{verdict(ratio <= TARGET_MEMORY)}]")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("cpu", "memory", "all"), default="all")
    ap.add_argument("--traces", type=int, default=100_000)
    ap.add_argument("--sizes-mb", default="20,200")
    a = ap.parse_args(argv)
    print(f"traces in: OTLP JSON read and mapped ({load()})")
    if a.part in ("cpu", "all"):
        cpu(a.traces)
    if a.part in ("memory", "all"):
        memory([float(x) for x in a.sizes_mb.split(",") if x.strip()])
