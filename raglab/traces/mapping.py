"""One trace -> what ``monitor`` and ``replay`` read (the table of docs/traces.md).

- candidates: the first retriever span's documents, in rank order;
- context: the last reranker's output documents, else the documents of the retriever span
  the (last) model span follows (the last retriever when none ends before it);
- answer: the root's output (its ``answer``, ``output``, ``result`` or ``response`` field
  when it is a JSON object), else the last model span's output;
- question: the root's input (its ``input``, ``question`` or ``query`` field when it is a
  JSON object; MLflow: else the trace's request preview when it is whole JSON), else the
  retriever's query, else the first model span's user message;
- latency_ms: ``retrieve``, ``rerank``, ``generate``, ``embed`` (span durations by kind,
  a span inside one of its own kind not counted twice) and ``total`` (the root);
- usage: input and output tokens summed over the model spans; model: the last model
  span's; doc_id: ``metadata[doc_id_key]``, else ``metadata.source``, else the
  document's id;
- timestamp: the root's start; user (``user.id``), session (``session.id``,
  ``gen_ai.conversation.id``), the case id (an attribute, ``raglab.case_id`` by default)
  from the root first, then any span.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from raglab.traces import conventions as C
from raglab.traces import problems as P
from raglab.traces.spans import Span, Trace

ANSWER_FIELDS = ("answer", "output", "result", "response")
QUESTION_FIELDS = ("input", "question", "query")
STAGES = {C.RETRIEVER: "retrieve", C.RERANKER: "rerank", C.LLM: "generate",
          C.EMBEDDING: "embed"}


class BadTrace(Exception):
    """A trace that cannot be read: ``kind`` (a :mod:`raglab.traces.problems` kind)."""

    def __init__(self, kind: str, message: str = ""):
        super().__init__(message)
        self.kind, self.message = kind, message


def to_record(trace: Trace, doc_id_key: str = "doc_id",
              case_id_attribute: str = "raglab.case_id") -> dict[str, Any]:
    """The trace as a record: the SystemOutput fields (``case_id`` None when no attribute
    names it) plus ``trace_id``, ``question``, ``timestamp``, ``user``, ``session``,
    ``feedback``. Raises :class:`BadTrace`."""
    spans = trace.spans
    root = _root(spans)
    for s in spans:
        if s.end_ns is None or s.start_ns is None:
            raise BadTrace(P.NO_END, f"span {s.name!r}")
    order = sorted(range(len(spans)), key=lambda i: (spans[i].start_ns or 0, i))
    kinds = [C.kind_of(s.attrs) for s in spans]
    index = {s.span_id: i for i, s in enumerate(spans)}
    seen: dict[int, C.View] = {}

    def views(i: int) -> C.View:  # (only the spans the mapping reads are looked into)
        v = seen.get(i)
        if v is None:
            seen[i] = v = C.view(spans[i])
        return v

    retrievers = [i for i in order if kinds[i] == C.RETRIEVER]
    if not retrievers:
        raise BadTrace(P.NO_RETRIEVER)
    rerankers = [i for i in order if kinds[i] == C.RERANKER]
    models = [i for i in order if kinds[i] == C.LLM]
    first_docs = views(retrievers[0]).docs or []
    if rerankers:
        context_docs = views(rerankers[-1]).docs or []
    else:
        feeding = retrievers[-1]
        if models:
            started = spans[models[-1]].start_ns or 0
            before = [i for i in retrievers if (spans[i].end_ns or 0) <= started]
            feeding = before[-1] if before else feeding
        context_docs = views(feeding).docs or []
    rv = views(next(i for i in order if spans[i] is root))
    question = _field(rv.input, QUESTION_FIELDS)
    if question is None:  # MLflow: the trace's request preview, when whole
        question = _field(trace.info.get("request_preview"), QUESTION_FIELDS)
    if not isinstance(question, str) or not question:
        question = views(retrievers[0]).input
        if not isinstance(question, str) and models:
            question = views(models[0]).input
    answer = _field(rv.output, ANSWER_FIELDS)
    if answer is None:
        answer = _field(trace.info.get("response_preview"), ANSWER_FIELDS)
    if not isinstance(answer, str):
        answer = C.text_of(views(models[-1]).output) if models else None
    model_views = [views(i) for i in models]
    record: dict[str, Any] = {
        "case_id": _attr(spans, root, case_id_attribute, trace.info.get("tags")),
        "trace_id": trace.trace_id,
        "candidates": [_hit(d, doc_id_key) for d in first_docs],
        "context": [_hit(d, doc_id_key) for d in context_docs],
        "answer": answer if isinstance(answer, str) else None,
        "latency_ms": _latency(spans, kinds, index, root),
        "usage": _usage(model_views),
        "question": question if isinstance(question, str) and question else None,
        "timestamp": _timestamp(root),
    }
    model = next((v.model for v in reversed(model_views) if v.model), None)
    if model:
        record["model"] = model
    user = _attr(spans, root, "user.id", trace.info.get("user"))
    record["user"] = {"id": user} if user else None
    record["session"] = (_attr(spans, root, "session.id", trace.info.get("session"))
                         or _attr(spans, root, "gen_ai.conversation.id"))
    record["feedback"] = trace.info.get("feedback")
    if record["question"] is None or record["answer"] is None:
        raise BadTrace(P.NO_CONTENT, "no " + " and no ".join(
            k for k in ("question", "answer") if record[k] is None))
    return record


def _timestamp(root: Span) -> str:
    """The root's start as ISO 8601 (UTC); BadTrace for one no date can hold."""
    try:
        return datetime.fromtimestamp((root.start_ns or 0) / 1e9, UTC).isoformat()
    except (OverflowError, ValueError, OSError, TypeError):
        raise BadTrace(P.BAD_TIME, f"span {root.name!r}: start {root.start_ns!r}") from None


def _root(spans: list[Span]) -> Span:
    """The span without a parent (the longest one when there are several). Raises
    BadTrace for no root, or a cycle of parent ids among the spans."""
    by_id = {s.span_id: s for s in spans}
    state: dict[str, int] = {}  # 1: on the current walk, 2: reaches a root or leaves
    for s in spans:
        walk: list[str] = []
        cur: Span | None = s
        while cur is not None and state.get(cur.span_id) is None:
            state[cur.span_id] = 1
            walk.append(cur.span_id)
            cur = by_id.get(cur.parent_id) if cur.parent_id else None
        if cur is not None and state.get(cur.span_id) == 1:
            raise BadTrace(P.CYCLE, f"span {cur.name!r} is its own ancestor")
        for sid in walk:
            state[sid] = 2
    roots = [s for s in spans if not s.parent_id]
    if not roots:
        raise BadTrace(P.NO_ROOT, f"{len(spans)} span(s), every one with a parent")
    return min(roots, key=lambda s: (s.start_ns or 0, -(s.end_ns or 0)))


def _field(value: Any, names: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        for n in names:
            if n in value:
                return value[n]
        return None
    return value


def _attr(spans: list[Span], root: Span, key: str, fallback: Any = None) -> Any:
    v = root.attrs.get(key)
    if v is None:
        v = next((s.attrs[key] for s in spans if s.attrs.get(key) is not None), None)
    if v is None and isinstance(fallback, dict):
        v = fallback.get(key)
    elif v is None:
        v = fallback
    return str(v) if v is not None and not isinstance(v, (dict, list)) and str(v) else None


_KNOWN_META = ("source", "start_index", "score")


def _hit(d: dict[str, Any], doc_id_key: str) -> dict[str, Any]:
    meta = d.get("metadata")
    if type(meta) is not dict:
        meta = {}
    doc_id = meta.get(doc_id_key)
    if type(doc_id) is not str or not doc_id:
        doc_id = meta.get("source")
        if type(doc_id) is not str or not doc_id:
            doc_id = d.get("id")
            if type(doc_id) is not str or not doc_id:
                raise BadTrace(P.NO_DOC_ID, f"no metadata {doc_id_key!r} "
                                            "(system.doc_id_key), no 'source' and no "
                                            "document id")
    text = d.get("content")
    if type(text) is not str:
        text = ""
    hit: dict[str, Any] = {"doc_id": doc_id, "text": text}
    start = meta.get("start_index")
    if type(start) is int and start >= 0:
        hit["start"], hit["end"] = start, start + len(text)
    score = d.get("score", meta.get("score"))
    if type(score) is not float:
        score = C._num(score)
    if score is not None and score == score and abs(score) != float("inf"):
        hit["score"] = score
    if meta:
        rest = {k: v for k, v in meta.items() if k != doc_id_key and k not in _KNOWN_META}
        if rest:
            hit["metadata"] = rest
    return hit


def _latency(spans: list[Span], kinds: list[str], index: dict[str, int],
             root: Span) -> dict[str, float]:
    out: dict[str, float] = {}
    for i, kind in enumerate(kinds):
        stage = STAGES.get(kind)
        if stage is None:
            continue
        p = index.get(spans[i].parent_id)
        while p is not None and kinds[p] != kind:  # (no cycle: checked before)
            p = index.get(spans[p].parent_id)
        if p is None:  # not inside a span of its own kind
            out[stage] = out.get(stage, 0.0) + _ms(spans[i])
    out["total"] = _ms(root)
    return out


def _ms(s: Span) -> float:
    return max(0, (s.end_ns or 0) - (s.start_ns or 0)) / 1e6


def _usage(model_views: list[C.View]) -> dict[str, float]:
    out: dict[str, float] = {}
    for v in model_views:
        for k, n in (("input_tokens", v.input_tokens), ("output_tokens", v.output_tokens)):
            if n is not None:
                out[k] = out.get(k, 0.0) + n
    return out
