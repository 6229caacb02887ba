"""LlamaIndex adapter: ``system=llamaindex system.factory=MODULE:FUNCTION``.

The same factory contract as ``system=langchain`` (:mod:`raglab.systems.factory`): the
factory returns a query engine (the answer is ``str(response)``, the context
``response.source_nodes``), a chat engine (a ``BaseChatEngine``, or anything with
``chat(message, chat_history=...)``: read as a query engine's response), or a retriever
(retrieval metrics only, said once), or a function ``(filters, user)`` returning one of
them for each case. A chat engine is asked ``chat(question,
chat_history=[ChatMessage(...)])`` with the turn's history
(``MessageRole.USER``/``ASSISTANT``; empty for a single-turn case or a first turn), its
memory reset first (``reset()``) so that nothing of another case reaches it; an engine
keeps a memory, so one engine answers one case at a time (one built once, or returned
again by the function, serialises the cases; engines built per case answer side by side).
A query engine or retriever cannot take a history: a run whose turns have one says so
once. ``filters`` is a ``MetadataFilters`` made from the case's filters (a key equal to
the value; a list value: ``IN``), ``user`` the case's user as ``{"id": ..., "groups":
[...]}`` or None (anonymous), so the function can add its permission filter and build the
engine with ``index.as_query_engine(filters=filters)``. A query engine or retriever built
once cannot receive them; a run whose cases have a user or filters says so once. Hits from
nodes: ``doc_id`` from the node's ``metadata[system.doc_id_field]``, then ``source``, then
its ``ref_doc_id``; ``text`` the node's content, ``start``/``end`` its character offsets,
``score`` its score. Retrieval and model calls are counted (``work.retrievals``,
``work.generations``; a call inside another of the same stage counts once, calls side by
side, such as an async pipeline's, each count) and timed per stage (``retrieve``,
``generate``; a call that raises is timed until it does), and token usage read where the
model's response reports it, from LlamaIndex's instrumentation events and spans (the root
dispatcher; a call is inside another when its span descends from the other's; calls the
pipeline makes in threads of its own are not seen). llama-index-core is imported only when
this system is built (the optional extra ``llamaindex``:
:func:`raglab.errors.install_line`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from typing import Any, Literal

from raglab.components import NO_CONTEXT, BuildContext
from raglab.registry import register
from raglab.systems.base import SystemRequest
from raglab.systems.factory import (
    FactoryCfg,
    FrameworkSystem,
    SaidOnce,
    StageClock,
    make_hit,
)


class LlamaIndexSystemCfg(FactoryCfg):
    name: Literal["llamaindex"]


#: the clock of the answer each thread is making (read by the one event and span handler)
_LOCAL = threading.local()
_LISTENING: list[Any] = []
_LISTEN_LOCK = threading.Lock()


@register("system", "llamaindex", config=LlamaIndexSystemCfg)
class LlamaIndexSystem(FrameworkSystem):
    """The user's LlamaIndex query engine or retriever (or a function making one per case
    from its filters and user), built by their factory."""

    framework = ("llamaindex", "llama_index.core", "llamaindex")
    answering = "a query engine"
    cfg: LlamaIndexSystemCfg

    def __init__(self, cfg: LlamaIndexSystemCfg, ctx: BuildContext = NO_CONTEXT):
        super().__init__(cfg, ctx)
        self.per_case = not _is_engine(self.pipeline, self.accepted()[0])
        self._unreached = SaidOnce(
            "the factory returned a query engine, chat engine or retriever built once: the "
            "cases' user and filters do not reach it (return a function (filters, user) "
            "that builds one per case to apply them)")
        self._no_history = SaidOnce(
            "a query engine or retriever cannot take a conversation's history: the turns "
            "are asked their question alone (return a chat engine, such as "
            "CondenseQuestionChatEngine over the index, to pass it)")
        # a chat engine's memory takes one case at a time (concurrent calls on one
        # LlamaIndex Memory hang): a lock per engine, so engines built per case run side
        # by side and one built once (or returned again) answers one case at a time
        self._locks: weakref.WeakKeyDictionary[Any, threading.Lock] = \
            weakref.WeakKeyDictionary()
        self._locks_lock, self._shared_lock = threading.Lock(), threading.Lock()
        _listen()

    @classmethod
    def accepted(cls) -> tuple[tuple[type, ...], type, str]:
        from llama_index.core.base.base_query_engine import BaseQueryEngine
        from llama_index.core.base.base_retriever import BaseRetriever
        from llama_index.core.chat_engine.types import BaseChatEngine

        return ((BaseQueryEngine, BaseChatEngine, BaseRetriever), BaseRetriever,
                "a LlamaIndex query engine, chat engine or retriever (or a function "
                "making one)")

    @classmethod
    def built_ok(cls, built: Any) -> bool:
        return callable(built) or _is_chat(built) or super().built_ok(built)

    def answer(self, req: SystemRequest) -> Any:
        clock = _LOCAL.clock = StageClock()
        try:
            nodes, answer = self._ask(req)
        finally:
            _LOCAL.clock = None
            clock.count(self.ctx.work)
        hits = [self._hit(n) for n in nodes]
        return self.finish({"case_id": req.case_id, "candidates": hits, "context": hits,
                            "answer": answer}, clock, req.case_id)

    def _lock_of(self, engine: Any) -> threading.Lock:
        """The lock of a chat engine (one for all that take no weak reference)."""
        with self._locks_lock:
            try:
                return self._locks.setdefault(engine, threading.Lock())
            except TypeError:
                return self._shared_lock

    def _ask(self, req: SystemRequest) -> tuple[list, str | None]:
        """(the nodes retrieved, the answer or None) of the case."""
        pipeline, retriever_only = self.pipeline, self.retriever_only
        if self.per_case:
            user = req.user.model_dump() if req.user is not None else None
            pipeline = self.pipeline(metadata_filters(req.filters), user)  # (any names)
            kinds, retriever, _ = self.accepted()
            if not _is_engine(pipeline, kinds):
                raise ValueError(f"the factory's function returned a "
                                 f"{type(pipeline).__name__}, not a LlamaIndex query "
                                 "engine, chat engine or retriever")
            retriever_only = isinstance(pipeline, retriever)
        elif req.filters or req.user is not None:
            self._unreached()
        if _is_chat(pipeline):
            with self._lock_of(pipeline):
                response = _chat(pipeline, req)
        else:
            if req.history:
                self._no_history()
            if retriever_only:
                self._retrieval_note()
                return list(pipeline.retrieve(req.question)), None
            response = pipeline.query(req.question)
        nodes = list(getattr(response, "source_nodes", None) or [])
        text = getattr(response, "response", None)
        return nodes, (str(response) if text is not None else None)

    def _hit(self, scored: Any) -> dict[str, Any]:
        node = getattr(scored, "node", scored)
        meta = getattr(node, "metadata", None)
        get_content = getattr(node, "get_content", None)
        if not isinstance(meta, dict) or not callable(get_content):
            raise ValueError(f"the context holds a {type(scored).__name__}, not a LlamaIndex "
                             "node")
        from llama_index.core.schema import MetadataMode

        return make_hit(meta, get_content(metadata_mode=MetadataMode.NONE),
                        self.cfg.doc_id_field, fallback_id=getattr(node, "ref_doc_id", None),
                        start=getattr(node, "start_char_idx", None),
                        end=getattr(node, "end_char_idx", None),
                        score=getattr(scored, "score", None))


def _is_chat(obj: Any) -> bool:
    """Whether ``obj`` is a chat engine (has a ``chat`` method)."""
    return callable(getattr(obj, "chat", None)) and not isinstance(obj, type)


def _is_engine(obj: Any, kinds: tuple[type, ...]) -> bool:
    """Whether ``obj`` is what the adapter asks (not a function making one)."""
    return isinstance(obj, kinds) or _is_chat(obj)


def _chat(engine: Any, req: SystemRequest) -> Any:
    """The chat engine's response to the case: its memory reset, then asked the question
    with the turn's history as ``ChatMessage``s."""
    from llama_index.core.llms import ChatMessage, MessageRole

    roles = {"user": MessageRole.USER, "assistant": MessageRole.ASSISTANT}
    history = [ChatMessage(role=roles[m["role"]], content=m["content"]) for m in req.history]
    reset = getattr(engine, "reset", None)
    if callable(reset):
        reset()
    return engine.chat(req.question, chat_history=history)


def metadata_filters(filters: Mapping[str, Any]) -> Any:
    """The case's filters as LlamaIndex ``MetadataFilters`` (all of them must hold): a key
    equal to its value, or, for a list value, ``IN`` it (empty: no filter)."""
    from llama_index.core.vector_stores import FilterOperator, MetadataFilter, MetadataFilters

    out = []
    for key, value in filters.items():
        try:
            out.append(MetadataFilter(key=key, value=value, operator=FilterOperator.IN)
                       if isinstance(value, list) else MetadataFilter(key=key, value=value))
        except ValueError:  # (pydantic's error names the value: not repeated here)
            raise ValueError(f"the case's filter {key!r} has a value LlamaIndex's "
                             "MetadataFilter does not take") from None
    return MetadataFilters(filters=out)


def _listen() -> None:
    """raglab's event and span handlers on LlamaIndex's root dispatcher, added once per
    process."""
    with _LISTEN_LOCK:
        if not _LISTENING:
            from llama_index.core.instrumentation import get_dispatcher

            handler, spans = _handler(), _span_handler()
            root = get_dispatcher()
            root.add_span_handler(spans)
            root.add_event_handler(handler)
            _LISTENING.extend((handler, spans))


def _handler() -> Any:
    """An event handler counting and timing retrieval and the model, and reading token
    usage, for the answer the calling thread is making (llama-index-core imported here). A
    call's events carry its span's id; a call whose span descends from one of the same
    stage being timed is nested; a span dropped (the call raised) ends its call."""
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.events.llm import (
        LLMChatEndEvent,
        LLMChatStartEvent,
        LLMCompletionEndEvent,
        LLMCompletionStartEvent,
    )
    from llama_index.core.instrumentation.events.retrieval import (
        RetrievalEndEvent,
        RetrievalStartEvent,
    )
    from llama_index.core.instrumentation.events.span import SpanDropEvent

    starts: dict[type, str] = {RetrievalStartEvent: "retrieve",
                               LLMChatStartEvent: "generate",
                               LLMCompletionStartEvent: "generate"}
    ends = (RetrievalEndEvent, LLMChatEndEvent, LLMCompletionEndEvent)

    class _RaglabTimings(BaseEventHandler):
        @classmethod
        def class_name(cls) -> str:
            return "RaglabTimings"

        def handle(self, event: Any, **kwargs: Any) -> None:
            clock = getattr(_LOCAL, "clock", None)
            if clock is None:
                return
            stage = starts.get(type(event))
            if stage is not None:
                clock.start(stage, event.span_id,
                            nested=clock.within(stage, event.span_id))
                model = getattr(event, "model_dict", None) or {}
                name = model.get("model_name") or model.get("model")
                if isinstance(name, str) and name not in ("", "unknown"):
                    clock.model = name
            elif isinstance(event, ends) and clock.end(event.span_id) \
                    and not isinstance(event, RetrievalEndEvent):
                clock.add_usage(*_usage(getattr(event, "response", None)))
            elif isinstance(event, SpanDropEvent):
                clock.end(event.span_id)

    return _RaglabTimings()


def _span_handler() -> Any:
    """A span handler recording, for the answer the calling thread is making, which span
    each new span runs inside (its parent), so that nesting follows ancestry."""
    from llama_index.core.instrumentation.span import BaseSpan
    from llama_index.core.instrumentation.span_handlers import BaseSpanHandler

    class _RaglabSpans(BaseSpanHandler[BaseSpan]):
        @classmethod
        def class_name(cls) -> str:
            return "RaglabSpans"

        def span_enter(self, id_: str, bound_args: Any, instance: Any = None,
                       parent_id: str | None = None, tags: Any = None,
                       **kwargs: Any) -> None:
            clock = getattr(_LOCAL, "clock", None)
            if clock is not None:
                clock.link(id_, parent_id)

        def span_exit(self, *args: Any, **kwargs: Any) -> None:
            return None

        def span_drop(self, *args: Any, **kwargs: Any) -> None:
            return None  # (its SpanDropEvent reaches the event handler)

        def new_span(self, *args: Any, **kwargs: Any) -> None:
            return None

        def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> None:
            return None

        def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> None:
            return None

    return _RaglabSpans()


def _usage(response: Any) -> tuple[Any, Any]:
    """(input tokens, output tokens) a model's response reports (``raw.usage`` as OpenAI
    or Anthropic name them, then ``additional_kwargs``), or Nones."""
    raw = getattr(response, "raw", None)
    for usage in (raw.get("usage") if isinstance(raw, Mapping) else getattr(raw, "usage", None),
                  getattr(response, "additional_kwargs", None)):
        if usage is None:
            continue

        def pick(*names: str, usage: Any = usage) -> Any:
            for n in names:
                v = usage.get(n) if isinstance(usage, Mapping) else getattr(usage, n, None)
                if v is not None:
                    return v
            return None

        found = (pick("prompt_tokens", "input_tokens"),
                 pick("completion_tokens", "output_tokens"))
        if found != (None, None):
            return found
    return None, None
