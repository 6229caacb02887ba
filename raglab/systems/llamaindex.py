"""LlamaIndex adapter: ``system=llamaindex system.factory=MODULE:FUNCTION``.

The same factory contract as ``system=langchain`` (:mod:`raglab.systems.factory`): the
factory returns a query engine (the answer is ``str(response)``, the context
``response.source_nodes``) or a retriever (retrieval metrics only, said once). Hits from
nodes: ``doc_id`` from the node's ``metadata[system.doc_id_field]``, then ``source``, then
its ``ref_doc_id``; ``text`` the node's content, ``start``/``end`` its character offsets,
``score`` its score. Latencies per stage (``retrieve``, ``generate``) and token usage (where
the model's raw response reports it) come through the pipeline's callback manager.
llama-index-core is imported only when this system is built (the optional extra
``llamaindex``: :func:`raglab.errors.install_line`).
"""

from __future__ import annotations

import threading
from typing import Any, Literal

from raglab.components import NO_CONTEXT, BuildContext
from raglab.registry import register
from raglab.systems.base import SystemRequest
from raglab.systems.factory import FactoryCfg, FrameworkSystem, StageClock, make_hit


class LlamaIndexSystemCfg(FactoryCfg):
    name: Literal["llamaindex"]


@register("system", "llamaindex", config=LlamaIndexSystemCfg)
class LlamaIndexSystem(FrameworkSystem):
    """The user's LlamaIndex query engine or retriever, built by their factory."""

    framework = ("llamaindex", "llama_index.core", "llamaindex")
    answering = "a query engine"
    cfg: LlamaIndexSystemCfg

    def __init__(self, cfg: LlamaIndexSystemCfg, ctx: BuildContext = NO_CONTEXT):
        super().__init__(cfg, ctx)
        self._local = threading.local()  # the clock of the answer this thread is making
        manager = getattr(self.pipeline, "callback_manager", None)
        if manager is not None:
            manager.add_handler(_handler(self._local))

    @classmethod
    def accepted(cls) -> tuple[tuple[type, ...], type, str]:
        from llama_index.core.base.base_query_engine import BaseQueryEngine
        from llama_index.core.base.base_retriever import BaseRetriever

        return ((BaseQueryEngine, BaseRetriever), BaseRetriever,
                "a LlamaIndex query engine or retriever")

    def answer(self, req: SystemRequest) -> Any:
        clock = self._local.clock = StageClock()
        try:
            if self.retriever_only:
                self._retrieval_note()
                nodes = self.pipeline.retrieve(req.question)
                answer = None
            else:
                response = self.pipeline.query(req.question)
                nodes = list(getattr(response, "source_nodes", None) or [])
                text = getattr(response, "response", None)
                answer = str(response) if text is not None else None
        finally:
            self._local.clock = None
        hits = [self._hit(n) for n in nodes]
        return self.finish({"case_id": req.case_id, "candidates": hits, "context": hits,
                            "answer": answer}, clock, req.case_id)

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


def _handler(local: threading.local) -> Any:
    """A callback handler timing retrieval and the model, and reading token usage, for the
    answer the calling thread is making (llama-index-core imported here)."""
    from llama_index.core.callbacks import CBEventType, EventPayload
    from llama_index.core.callbacks.base_handler import BaseCallbackHandler

    stages = {CBEventType.RETRIEVE: "retrieve", CBEventType.LLM: "generate"}

    class _Timings(BaseCallbackHandler):
        def __init__(self) -> None:
            super().__init__([], [])

        def on_event_start(self, event_type, payload=None, event_id="", parent_id="", **kw):
            clock = getattr(local, "clock", None)
            if clock is not None and event_type in stages:
                clock.start(stages[event_type], event_id)
                model = (payload or {}).get(EventPayload.SERIALIZED) or {}
                name = model.get("model_name") or model.get("model") \
                    if isinstance(model, dict) else None
                if isinstance(name, str) and name not in ("", "unknown") \
                        and event_type == CBEventType.LLM:
                    clock.model = name
            return event_id

        def on_event_end(self, event_type, payload=None, event_id="", **kw):
            clock = getattr(local, "clock", None)
            if clock is None or event_type not in stages:
                return
            clock.end(event_id)
            if event_type == CBEventType.LLM:
                for key in (EventPayload.COMPLETION, EventPayload.RESPONSE):
                    raw = getattr((payload or {}).get(key), "raw", None)
                    usage = raw.get("usage") if isinstance(raw, dict) else None
                    if isinstance(usage, dict):
                        clock.add_usage(usage.get("prompt_tokens"),
                                        usage.get("completion_tokens"))
                        break

        def start_trace(self, trace_id=None) -> None:
            return None

        def end_trace(self, trace_id=None, trace_map=None) -> None:
            return None

    return _Timings()
