"""Each case of a run as an MLflow trace linked to the run, with its expectations and its
per-case metrics as feedback assessments.

A trace is built here as MLflow's own entities (spans and a ``TraceInfo`` holding its
assessments) and written with MLflow's tracing client: one ``start_trace`` per trace that
stores its info, tags, metadata and assessments together (no request per assessment), then
the spans of many traces in one ``log_spans`` request. The writing happens on a
background thread fed by the case loop (:meth:`TraceWriter.submit` only queues), so the
system's and the grader's calls never wait for the store.

Shape of a case's trace (``tracking.traces``: ``all`` cases, only the ``failed`` ones, or
``none``):

- spans: ``case`` (the root: the question in, the answer out) with the children
  ``retrieve`` (RETRIEVER: the candidates as documents, id, text and score), ``rerank``
  (RERANKER), ``assemble context`` (the context passages) and ``generate`` (LLM: the answer
  and its citations), each as long as the stage's latency in the record; then, when the
  grader called a model for the case, ``grade`` with one CHAT_MODEL span per call
  (:func:`judge_spans`: model, tokens, cost, latency, cached, grader version, share);
- expectations (source HUMAN, the case set): ``expected_response`` (the reference answer),
  ``expected_facts`` (the nuggets), ``expected_retrieved_context`` (the gold evidence);
- feedback: one per headline per-case metric (every per-case metric with
  ``tracking.assessments=all``), named as the metric (``raglab.correctness`` for
  ``correctness``, a name MLflow's UI keeps for its own judge:
  :func:`raglab.tracking.assessments.feedback_name`), its value (a pass/fail check's as
  True when passed, so a failure shows red), its source (``LLM_JUDGE`` or ``CODE`` named
  ``<grader>@<metric version>`` for graded metrics, ``CODE`` named
  ``raglab.<family>@<version>`` for the others) and, where the grader's verdicts give
  evidence, that evidence as the rationale;
- state: ``ERROR`` for a case with an error or a failed pass/fail check (its root span's
  status says which checks), else ``OK`` (which MLflow shows as a green "Success");
- pairing: MLflow's evaluation view pairs the traces of two runs on their request (the
  root's inputs, ``{"case_id", "question"}``); the case id is also the trace's
  ``client_request_id``, its ``mlflow.eval.requestId`` tag and its ``raglab.case_id`` tag.
- conversations: a conversation's turn carries the conversation id as the trace's session
  (metadata ``mlflow.trace.session``), so MLflow groups the turns of one conversation (its
  Sessions view, ``mlflow.search_sessions``); a case with a user carries the user's id as
  ``mlflow.trace.user``.

A resumed run finds the cases its earlier process traced (by the ``raglab.case_id`` tag of
the run's traces) and traces each case once: a case run again (it had failed) replaces its
old trace; a case recorded but not yet traced when the process was killed is traced from
``records.jsonl`` when the run finishes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import queue
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from raglab.secrets import clip, scrub
from raglab.tracking.assessments import Assessor, expectations, failed_checks

log = logging.getLogger(__name__)

CASE_TAG = "raglab.case_id"
#: the trace tag MLflow's evaluation harness pairs on (mlflow.tracing.constant.TraceTagKey)
EVAL_REQUEST_TAG = "mlflow.eval.requestId"
SOURCE_RUN = "mlflow.sourceRun"  # TraceMetadataKey.SOURCE_RUN: the run a trace belongs to
SESSION = "mlflow.trace.session"  # TraceMetadataKey.TRACE_SESSION
USER = "mlflow.trace.user"  # TraceMetadataKey.TRACE_USER
TRACES_MODES = ("all", "failed", "none")
ASSESSMENT_MODES = ("headline", "all")
#: traces per write (one log_spans request; one start_trace each)
BATCH = 64
#: the case loop never waits for the writer unless this many traces are queued
QUEUE_MAX = 4096
MAX_PREVIEW = 1000
MAX_TEXT = 20000  # a passage's text in a span (longer ones are cut)
def traces_url(uri: str, experiment_id: str, run_id: str, compare_to: str | None = None) -> str:
    """The address of a run's cases in MLflow's evaluation view (the run page's Traces tab
    in the GenAI layout), compared case by case with ``compare_to`` when given."""
    from raglab.tracking.mlflow_ui import ui_base

    url = (f"{ui_base(uri)}/#/experiments/{experiment_id}/runs/{run_id}/traces"
           "?workflowType=genai")
    return url + (f"&compareToRunUuid={compare_to}" if compare_to else "")


def is_failed(record: Any) -> bool:
    """A case that failed: an error, or a diagnosis (a passing case has none)."""
    return record.error is not None or record.diagnosis is not None


# ---- building one trace --------------------------------------------------------------------
def _b64(value: int, size: int) -> str:
    return base64.b64encode(value.to_bytes(size, "big")).decode("ascii")


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _documents(hits: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Hits as MLflow retriever documents (``page_content``, ``metadata``, ``id``)."""
    out = []
    for rank, h in enumerate(hits, start=1):
        meta: dict[str, Any] = {"doc_id": h.get("doc_id"), "rank": rank, "score": h.get("score")}
        if h.get("start") is not None:
            meta.update(start=h.get("start"), end=h.get("end"))
        out.append({"page_content": (h.get("text") or "")[:MAX_TEXT], "metadata": meta,
                    "id": h.get("doc_id")})
    return out


class _SpanMaker:
    """Spans of one trace as MLflow ``Span`` entities, laid end to end from ``t0_ns``."""

    def __init__(self, trace_id: str, otel_trace_id: int):
        from mlflow.entities import Span

        self._span = Span
        self.trace_id = trace_id
        self.otel_trace_id = otel_trace_id
        self.spans: list[Any] = []

    def add(self, name: str, span_type: str, start_ns: int, end_ns: int, inputs: Any,
            outputs: Any, parent: int | None = None, error: str | None = None,
            attributes: Mapping[str, Any] | None = None) -> int:
        span_id = secrets.randbits(63) or 1
        attrs = {"mlflow.traceRequestId": _dump(self.trace_id),
                 "mlflow.spanType": _dump(span_type),
                 "mlflow.spanInputs": _dump(inputs), "mlflow.spanOutputs": _dump(outputs)}
        for k, v in (attributes or {}).items():
            attrs[k] = _dump(v)
        self.spans.append(self._span.from_dict({
            "trace_id": _b64(self.otel_trace_id, 16), "span_id": _b64(span_id, 8),
            "parent_span_id": _b64(parent, 8) if parent is not None else None,
            "name": name, "start_time_unix_nano": start_ns, "end_time_unix_nano": end_ns,
            "events": [], "attributes": attrs,
            "status": {"code": "STATUS_CODE_ERROR" if error else "STATUS_CODE_OK",
                       "message": error or ""}}))
        return span_id


def _ms_ns(ms: float | None) -> int:
    return int(round(float(ms or 0.0) * 1e6))


def _question(case: Any) -> str | None:
    """The case's question as a trace shows it (scrubbed of known secrets, as the record)."""
    from raglab.secrets import scrub

    return scrub(case.question) if case is not None else None


def _judge_ns(call: Mapping[str, Any]) -> int:
    """A judge call's span length: its latency, 0 when raglab's cache answered it."""
    return 0 if call.get("cached") else _ms_ns(call.get("latency_ms"))


def judge_spans(maker: _SpanMaker, record: Any, root: int, t0_ns: int,
                versions: Mapping[str, str], grader: str) -> None:
    """The grader's model calls that served the case (``grading_calls``), each a
    CHAT_MODEL span under one ``grade`` span that starts at ``t0_ns``: its model, tokens,
    cost, latency, whether raglab's cache answered it, the grader and its version, and
    for a call that served several cases the case's ``share`` of it. MLflow's own usage
    and cost attributes (which MLflow adds up per trace) are set on the calls made for
    this case alone in this run, not on a cached or shared one."""
    calls = [c for c in record.grading_calls or () if isinstance(c, Mapping)]
    if not calls:
        return
    end = t0_ns + max(map(_judge_ns, calls))
    parent = maker.add("grade", "CHAIN", t0_ns, end, {"calls": len(calls)},
                       {"grading_cost_usd": record.grading_cost_usd}, parent=root,
                       attributes={"raglab.grader": grader})
    for c in calls:
        family = c.get("family")
        inp, outp = int(c.get("input_tokens") or 0), int(c.get("output_tokens") or 0)
        attrs: dict[str, Any] = {f"raglab.{k}": v for k, v in c.items()}
        attrs.update({"raglab.grader": grader, "mlflow.llm.model": c.get("model"),
                      "raglab.grader_version": versions.get(family) if family
                      else dict(versions)})
        if c.get("backend"):
            attrs["mlflow.llm.provider"] = c["backend"]
        if not c.get("cached") and c.get("share") is None:
            attrs["mlflow.chat.tokenUsage"] = {
                "input_tokens": inp, "output_tokens": outp, "total_tokens": inp + outp,
                **{k: int(c[k]) for k in ("cache_read_input_tokens",
                                          "cache_creation_input_tokens") if c.get(k)}}
            if c.get("cost_usd") is not None:
                attrs["mlflow.llm.cost"] = {"total_cost": c["cost_usd"]}
        name = f"judge {family}" if family else "judge"
        maker.add(name, "CHAT_MODEL", t0_ns, t0_ns + _judge_ns(c),
                  {"model": c.get("model"), "family": family, "purpose": c.get("purpose")},
                  {"cached": bool(c.get("cached")), "input_tokens": inp,
                   "output_tokens": outp, "cost_usd": c.get("cost_usd")},
                  parent=parent, attributes=attrs)


def build_spans(maker: _SpanMaker, case: Any, record: Any, t0_ns: int,
                versions: Mapping[str, str] | None = None, grader: str = "") -> int:
    """The case's spans (``record``: its scrubbed form); returns the trace's duration in
    nanoseconds: the system's, then its grading's model calls, if any."""
    out = record.output or {}
    lat = dict(out.get("latency_ms") or {})
    total = _ms_ns(lat.get("total")) or sum(_ms_ns(v) for v in lat.values())
    calls = [c for c in record.grading_calls or () if isinstance(c, Mapping)]
    grading = max(map(_judge_ns, calls)) if calls else 0
    question = _question(case)
    inputs = {"case_id": record.case_id, "question": question}
    answer = out.get("answer")
    failed = failed_checks(record.metrics)
    root = maker.add("case", "CHAIN", t0_ns, t0_ns + total + grading, inputs,
                     {"answer": answer} if record.output is not None else None,
                     error=record.error or (f"failed: {', '.join(failed)}" if failed else None),
                     attributes={"raglab.latency_ms": lat} if lat else None)
    judge_spans(maker, record, root, t0_ns + total, versions or {}, grader)
    t = t0_ns
    candidates, context = out.get("candidates") or [], out.get("context") or []
    if record.output is None:
        return total + grading
    retrieved = bool(candidates) or "retrieve" in lat
    if retrieved:
        d = _ms_ns(lat.get("retrieve"))
        maker.add("retrieve", "RETRIEVER", t, t + d, {"query": question},
                  _documents(candidates), parent=root)
        t += d
    if "rerank" in lat:
        d = _ms_ns(lat.get("rerank"))
        maker.add("rerank", "RERANKER", t, t + d,
                  {"query": question, "candidates": len(candidates)},
                  _documents(context), parent=root)
        t += d
    key = next((k for k in ("context", "assemble", "assembly") if k in lat), None)
    if context or retrieved or key:
        d = _ms_ns(lat.get(key)) if key else 0
        maker.add("assemble context", "PARSER", t, t + d, {"passages": len(context)},
                  _documents(context), parent=root)
        t += d
    if answer is not None or "generate" in lat:
        d = _ms_ns(lat.get("generate"))
        attrs = {"raglab.usage": out["usage"]} if out.get("usage") else None
        maker.add("generate", "LLM", t, t + d, {"question": question,
                                                "context": [h.get("doc_id") for h in context]},
                  {"answer": answer, "citations": out.get("citations") or []}, parent=root,
                  attributes=attrs)
    return total + grading


#: MLflow's longest session id (mlflow.tracing.constant.MAX_CHARS_IN_TRACE_INFO_METADATA)
MAX_META_ID = 250


def _meta_id(value: str) -> str:
    """An id as trace metadata: scrubbed of known secrets (as the record is); one longer
    than MLflow keeps is cut and ends in a hash of the whole, so ids stay apart."""
    value = scrub(value)
    if len(value) <= MAX_META_ID:
        return value
    return value[:MAX_META_ID - 17] + "~" + hashlib.sha256(value.encode()).hexdigest()[:16]


def trace_metadata(case: Any, run_id: str) -> dict[str, str]:
    """The trace's metadata: its run, and the case's conversation (the session) and user."""
    meta = {SOURCE_RUN: run_id, "mlflow.trace_schema.version": "3"}
    turn = getattr(case, "conversation", None)
    if turn is not None:
        meta[SESSION] = _meta_id(turn.id)
    user = getattr(case, "user", None)
    if user is not None:
        meta[USER] = _meta_id(user.id)
    return meta


def build_trace(case: Any, record: Any, run_id: str, experiment_id: str, assessor: Assessor,
                dataset_name: str, t0_ns: int | None = None) -> tuple[Any, list[Any]]:
    """``(TraceInfo with its assessments, spans)`` of one case, starting at ``t0_ns``
    (None: now less the case's total latency)."""
    from mlflow.entities import TraceInfo, TraceLocation, TraceState

    otel_id = secrets.randbits(128) or 1
    trace_id = f"tr-{otel_id:032x}"
    maker = _SpanMaker(trace_id, otel_id)
    t0 = start_ns(record) if t0_ns is None else t0_ns
    duration = build_spans(maker, case, record, t0, assessor.versions, assessor.grader)
    question = _question(case)
    answer = (record.output or {}).get("answer")
    info = TraceInfo(
        trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(experiment_id),
        request_time=t0 // 1_000_000, execution_duration=duration // 1_000_000,
        # MLflow shows an OK trace as a green "Success": a case that failed a pass/fail
        # check (a leak, a forbidden string, a wrong abstention) is not one
        state=TraceState.ERROR if record.error or failed_checks(record.metrics)
        else TraceState.OK,
        request_preview=clip(_dump({"case_id": record.case_id, "question": question}),
                             MAX_PREVIEW),
        response_preview=(clip(_dump({"answer": answer}), MAX_PREVIEW)
                          if record.output is not None else None),
        client_request_id=record.case_id,
        trace_metadata=trace_metadata(case, run_id),
        tags={"mlflow.traceName": "case", CASE_TAG: record.case_id,
              EVAL_REQUEST_TAG: record.case_id,
              "raglab.failed": "true" if is_failed(record) else "false"},
        assessments=expectations(case, trace_id, dataset_name)
        + assessor.feedback(record, trace_id))
    return info, maker.spans


def start_ns(record: Any) -> int:
    """When a case's trace starts: now, less the case's total latency."""
    lat = (record.output or {}).get("latency_ms") or {}
    return time.time_ns() - _ms_ns(lat.get("total"))


#: a conversation's turns start this far apart in their traces (so MLflow lists them in order)
TURN_GAP_NS = 1_000_000


# ---- the writer ----------------------------------------------------------------------------
def traced_cases(client: Any, experiment_id: str, run_id: str) -> dict[str, list[str]]:
    """``{case id: [trace ids]}`` of the traces already linked to ``run_id``."""
    out: dict[str, list[str]] = {}
    token = None
    while True:
        page = client.search_traces(locations=[experiment_id], run_id=run_id,
                                    max_results=500, page_token=token, include_spans=False)
        for t in page:
            case_id = t.info.tags.get(CASE_TAG)
            if case_id is not None:
                out.setdefault(case_id, []).append(t.info.trace_id)
        token = page.token
        if not token:
            return out


_STOP = object()


class TraceWriter:
    """Writes the traces of one run's cases on a background thread.

    :meth:`submit` queues a finished case (and returns at once unless thousands are
    queued); :meth:`close` traces the recorded cases no process traced yet, writes what is
    queued and waits for the thread. A failed write is logged, never raised: the traces are
    a view of the run, ``records.jsonl`` is its record."""

    def __init__(self, uri: str, experiment_id: str, run_id: str, cases: Mapping[str, Any],
                 versions: Mapping[str, str], grader: str, llm_judge: bool,
                 traces: str = "all", assessments: str = "headline",
                 dataset_name: str = "cases", batch: int = BATCH):
        from mlflow.tracing.client import TracingClient

        self.client = TracingClient(uri)
        self.experiment_id = str(experiment_id)
        self.run_id = run_id
        self.cases = cases
        self.only_failed = traces == "failed"
        self.assessor = Assessor(versions, grader, llm_judge, assessments)
        self.dataset_name = dataset_name
        self.batch = batch
        self.done = traced_cases(self.client, self.experiment_id, run_id)
        self.written = 0
        self.failures = 0
        self._submitted: set[str] = set()  # (read and written by the case loop's thread)
        self._turn0: dict[str, int] = {}  # conversation id -> when its turn 0 would start
        self._queue: queue.Queue = queue.Queue(maxsize=QUEUE_MAX)
        self._thread = threading.Thread(target=self._loop, name="raglab-traces", daemon=True)
        self._thread.start()

    def wanted(self, record: Any) -> bool:
        return not self.only_failed or is_failed(record)

    def submit(self, record: Any) -> None:
        """Queue a finished case's record (its trace replaces one an earlier process wrote)."""
        if self.wanted(record):
            self._submitted.add(record.case_id)
            self._queue.put(record)

    def close(self, records: Path | None = None) -> None:
        """Trace the cases of ``records`` (records.jsonl, given when the run was resumed)
        that no process traced yet, then wait for every queued trace to be written."""
        if records is not None and self._thread.is_alive():
            try:
                self._catch_up(records)
            except Exception as exc:  # noqa: BLE001 - the traces are a view, not the record
                log.warning("MLflow traces: the earlier cases were not traced: %s", exc)
        self._queue.put(_STOP)
        self._thread.join()

    def _catch_up(self, records: Path) -> None:
        from raglab.data.record import read_records

        if not records.is_file():
            return
        for rec in read_records(records):
            if rec.case_id not in self.done and rec.case_id not in self._submitted \
                    and self.wanted(rec):
                self._submitted.add(rec.case_id)
                self._queue.put(rec.scrubbed())  # (as written, with the secrets known now)

    def _loop(self) -> None:
        stop = False
        while not stop:
            items = [self._queue.get()]
            while len(items) < self.batch:
                try:
                    items.append(self._queue.get(timeout=0.05))
                except queue.Empty:
                    break
            stop = any(r is _STOP for r in items)
            recs = [r for r in items if r is not _STOP]
            # the last record of a case wins (a case retried in this very batch)
            latest = {r.case_id: r for r in recs}
            if latest:
                try:
                    self._write(list(latest.values()))
                except Exception as exc:  # noqa: BLE001 - logged, the run goes on
                    self.failures += len(latest)
                    log.warning("MLflow traces: %d case(s) not traced: %s", len(latest), exc)

    def _start(self, case: Any, record: Any) -> int | None:
        """A turn's trace start: its conversation's first-written turn fixes when turn 0
        would start, and turn k starts k :data:`TURN_GAP_NS` after it, whatever order the
        turns finish in (MLflow orders a session's traces by their start). None for a
        single-turn case (now)."""
        turn = getattr(case, "conversation", None)
        if turn is None:
            return None
        t0 = self._turn0.setdefault(turn.id, start_ns(record) - turn.turn * TURN_GAP_NS)
        return t0 + turn.turn * TURN_GAP_NS

    def _write(self, records: list[Any]) -> None:
        infos, spans = [], []
        for rec in records:
            case = self.cases.get(rec.case_id)
            info, sp = build_trace(case, rec, self.run_id, self.experiment_id, self.assessor,
                                   self.dataset_name, self._start(case, rec))
            infos.append(info)
            spans += sp
        old = [t for rec in records for t in self.done.get(rec.case_id, ())]
        if old:  # a case run again: its new trace replaces the old one
            self.client.delete_traces(self.experiment_id, trace_ids=old)
        # each trace's info first (its one insert, assessments included), then the spans of
        # them all in one request (spans first would make each start_trace a merge)
        for info in infos:
            self.client.start_trace(info)
            self.done[info.tags[CASE_TAG]] = [info.trace_id]
        self.client.log_spans(self.experiment_id, spans)
        self.written += len(infos)
