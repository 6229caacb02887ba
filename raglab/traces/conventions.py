"""What a span means, under the convention its attributes follow.

- OpenInference (``openinference.span.kind``): ``input.value`` / ``output.value`` (JSON when
  ``*.mime_type`` says so), ``retrieval.documents.N.document.{id,score,content,metadata}``,
  ``reranker.input_documents.*`` / ``reranker.output_documents.*``, ``llm.model_name``,
  ``llm.token_count.prompt`` / ``.completion``, ``llm.output_messages.N.message.content``.
- OpenTelemetry GenAI (``gen_ai.*``): ``gen_ai.operation.name`` (``chat``,
  ``text_completion``, ``generate_content``: a model call; ``embeddings``; ``retrieval``),
  ``gen_ai.request.model`` / ``gen_ai.response.model``, ``gen_ai.usage.input_tokens`` /
  ``output_tokens``, ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (content
  capture is opt-in), ``gen_ai.retrieval.query.text`` and ``gen_ai.retrieval.documents``.
- MLflow (``mlflow.spanType``): RETRIEVER / RERANKER / CHAT_MODEL / LLM / EMBEDDING, the
  span's inputs and outputs (documents as ``page_content``, ``metadata``, ``id``),
  ``mlflow.chat.tokenUsage``, ``mlflow.llm.model``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_core import from_json

from raglab.traces.spans import Span

RETRIEVER, RERANKER, LLM, EMBEDDING, OTHER = "RETRIEVER", "RERANKER", "LLM", "EMBEDDING", "OTHER"
_MLFLOW_KINDS = {"RETRIEVER": RETRIEVER, "RERANKER": RERANKER, "CHAT_MODEL": LLM, "LLM": LLM,
                 "EMBEDDING": EMBEDDING}
_OI_KINDS = {"RETRIEVER": RETRIEVER, "RERANKER": RERANKER, "LLM": LLM, "EMBEDDING": EMBEDDING}
_GENAI_KINDS = {"chat": LLM, "text_completion": LLM, "generate_content": LLM,
                "embeddings": EMBEDDING, "retrieval": RETRIEVER}


@dataclass(slots=True)
class View:
    """A span as raglab reads it. ``docs`` are dicts with ``id``, ``content``, ``score``,
    ``metadata`` (any may be missing); ``docs`` of a reranker are its output documents."""

    kind: str
    input: Any = None
    output: Any = None
    docs: list[dict[str, Any]] | None = None
    model: str | None = None
    input_tokens: float | None = None
    output_tokens: float | None = None


def kind_of(a: dict[str, Any]) -> str:
    """The span's kind (RETRIEVER, RERANKER, LLM, EMBEDDING or OTHER) from its attributes."""
    kind = a.get("openinference.span.kind")
    if kind is not None:
        return _OI_KINDS.get(str(kind).upper(), OTHER)
    kind = a.get("mlflow.spanType")
    if kind is not None:
        return _MLFLOW_KINDS.get(str(kind).upper(), OTHER)
    op = a.get("gen_ai.operation.name")
    return OTHER if op is None else _GENAI_KINDS.get(str(op), OTHER)


def view(span: Span) -> View:
    a = span.attrs
    kind = a.get("openinference.span.kind")
    if kind is not None:
        return _openinference(a, _OI_KINDS.get(str(kind).upper(), OTHER))
    kind = a.get("mlflow.spanType")
    if kind is not None:
        return _mlflow(a, _MLFLOW_KINDS.get(str(kind).upper(), OTHER))
    op = a.get("gen_ai.operation.name")
    if op is not None:
        return _genai(a, _GENAI_KINDS.get(str(op), OTHER))
    return View(OTHER, _io(a, "input"), _io(a, "output"))


# ---- OpenInference -------------------------------------------------------------------
def _io(a: dict[str, Any], which: str) -> Any:
    v = a.get(f"{which}.value")
    if isinstance(v, str) and "json" in str(a.get(f"{which}.mime_type", "")):
        try:
            return from_json(v)
        except ValueError:
            return v
    return v


_DOC_FIELDS = ("id", "content", "score", "metadata")


def flat_documents(a: dict[str, Any], prefix: str) -> list[dict[str, Any]] | None:
    """``PREFIX.N.document.FIELD`` attributes (FIELD: id, content, score, metadata; N from
    0 up, as OpenInference numbers them) as a list of documents in N order (an attribute
    ``PREFIX`` holding a list of documents is read too); None when absent."""
    whole = a.get(prefix)
    if isinstance(whole, list):
        return [_doc_fields({k.removeprefix("document."): v for k, v in d.items()})
                for d in whole if isinstance(d, dict)]
    docs = []
    n = 0
    while True:
        head = f"{prefix}.{n}.document."
        doc = {f: a[head + f] for f in _DOC_FIELDS if head + f in a}
        if not doc:
            break
        docs.append(_doc_fields(doc))
        n += 1
    return docs or None


def _doc_fields(d: dict[str, Any]) -> dict[str, Any]:
    meta = d.get("metadata")
    if isinstance(meta, str):
        try:
            d["metadata"] = from_json(meta)
        except ValueError:
            d["metadata"] = None
    return d


def _openinference(a: dict[str, Any], kind: str) -> View:
    v = View(kind, _io(a, "input"), _io(a, "output"))
    if kind == RETRIEVER:
        v.docs = flat_documents(a, "retrieval.documents")
    elif kind == RERANKER:
        v.docs = flat_documents(a, "reranker.output_documents")
    elif kind == LLM:
        v.model = _str(a.get("llm.model_name"))
        v.input_tokens = _num(a.get("llm.token_count.prompt"))
        v.output_tokens = _num(a.get("llm.token_count.completion"))
        msgs = flat_messages(a, "llm.output_messages")
        if msgs:
            v.output = msgs[-1]
        else:
            v.output = text_of(v.output)
    return v


def flat_messages(a: dict[str, Any], prefix: str) -> list[str]:
    """The text of ``PREFIX.N.message.content`` for N from 0 up (messages without text,
    e.g. tool calls, give '')."""
    out = []
    n = 0
    while f"{prefix}.{n}.message.role" in a or f"{prefix}.{n}.message.content" in a:
        text = a.get(f"{prefix}.{n}.message.content")
        out.append(text if isinstance(text, str) else "")
        n += 1
    return out


# ---- OpenTelemetry GenAI -------------------------------------------------------------
def _genai(a: dict[str, Any], kind: str) -> View:
    v = View(kind)
    if kind == RETRIEVER:
        v.input = _str(a.get("gen_ai.retrieval.query.text"))
        docs = a.get("gen_ai.retrieval.documents")
        if isinstance(docs, str):
            try:
                docs = from_json(docs)
            except ValueError:
                docs = None
        if isinstance(docs, list):
            v.docs = [_doc_fields(dict(d)) for d in docs if isinstance(d, dict)]
    elif kind == LLM:
        v.model = _str(a.get("gen_ai.response.model")) or _str(a.get("gen_ai.request.model"))
        v.input_tokens = _num(a.get("gen_ai.usage.input_tokens",
                                    a.get("gen_ai.usage.prompt_tokens")))
        v.output_tokens = _num(a.get("gen_ai.usage.output_tokens",
                                     a.get("gen_ai.usage.completion_tokens")))
        v.input = _message_text(a.get("gen_ai.input.messages"), "user")
        v.output = (_message_text(a.get("gen_ai.output.messages"), "assistant")
                    or _str(a.get("gen_ai.completion")))
    return v


def _message_text(msgs: Any, role: str) -> str | None:
    """The text of the last message of ``role`` (GenAI messages: ``role`` and ``parts``
    of ``{"type": "text", "content": ...}``; a JSON string of them too)."""
    if isinstance(msgs, str):
        try:
            msgs = from_json(msgs)
        except ValueError:
            return None
    if not isinstance(msgs, list):
        return None
    for m in reversed(msgs):
        if not isinstance(m, dict) or m.get("role", role) != role:
            continue
        parts = m.get("parts")
        if isinstance(parts, list):
            texts = [str(p["content"]) for p in parts if isinstance(p, dict)
                     and p.get("type", "text") == "text" and isinstance(p.get("content"), str)]
            if texts:
                return "".join(texts)
        if isinstance(m.get("content"), str):
            return m["content"]
    return None


# ---- MLflow --------------------------------------------------------------------------
def _mlflow(a: dict[str, Any], kind: str) -> View:
    v = View(kind, a.get("mlflow.spanInputs"), a.get("mlflow.spanOutputs"))
    if kind == RETRIEVER:
        v.docs = _mlflow_docs(v.output)
    elif kind == RERANKER:
        v.docs = _mlflow_docs(v.output)
    elif kind == LLM:
        v.model = _str(a.get("mlflow.llm.model"))
        usage = a.get("mlflow.chat.tokenUsage")
        if isinstance(usage, dict):
            v.input_tokens = _num(usage.get("input_tokens"))
            v.output_tokens = _num(usage.get("output_tokens"))
        v.output = text_of(v.output)
    return v


def _mlflow_docs(out: Any) -> list[dict[str, Any]] | None:
    if isinstance(out, dict):
        out = out.get("documents", out.get("output"))
    if not isinstance(out, list):
        return None
    docs = []
    for d in out:
        if not isinstance(d, dict):
            continue
        meta = d.get("metadata") if isinstance(d.get("metadata"), dict) else {}
        doc = {"content": d.get("page_content", d.get("content")), "metadata": meta,
               "id": d.get("id")}
        if "score" in d:
            doc["score"] = d["score"]
        docs.append(doc)
    return docs


# ---- values --------------------------------------------------------------------------
def text_of(out: Any) -> Any:
    """A model call's output as text: a string; a chat completion (``choices``); a
    LangChain result (``generations``) or message (``content``); else as it is."""
    if isinstance(out, str) or out is None:
        return out
    if isinstance(out, dict):
        choices = out.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            c = choices[0]
            msg = c.get("message")
            if isinstance(msg, dict) and isinstance(msg.get("content"), str):
                return msg["content"]
            if isinstance(c.get("text"), str):
                return c["text"]
        gens = out.get("generations")
        if isinstance(gens, list) and gens and isinstance(gens[0], list) and gens[0]:
            g = gens[0][0]
            if isinstance(g, dict):
                if isinstance(g.get("text"), str):
                    return g["text"]
                return text_of(g.get("message"))
        if isinstance(out.get("content"), str):
            return out["content"]
        kwargs = out.get("kwargs")  # a serialized LangChain message
        if isinstance(kwargs, dict) and isinstance(kwargs.get("content"), str):
            return kwargs["content"]
    return out


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return None
    try:
        f = float(v)
    except ValueError:
        return None
    return f if f == f and f not in (float("inf"), float("-inf")) else None
