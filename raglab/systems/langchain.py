"""LangChain adapter: ``system=langchain system.factory=MODULE:FUNCTION``.

The factory is called with the run's configuration sections as a plain dict
(:func:`raglab.systems.factory.factory_config`) and returns either a retriever (a
``BaseRetriever``: retrieval metrics only; the generation metrics do not apply, said once)
or a runnable whose output maps ``answer`` and ``context`` (a list of ``Document``), the
shape of LangChain's retrieval-chain recipes (a runnable whose output is a list of
Documents is read as a retriever). The runnable is invoked with the question, or with
``{system.input_field: question}`` when that is set (``create_retrieval_chain`` expects
``input``), and a ``RunnableConfig`` carrying the case: ``configurable`` holds
``raglab_user`` (``{"id": ..., "groups": [...]}``, or None for an anonymous user),
``raglab_filters`` (the case's filters, ``{}`` for none) and ``raglab_case_id``, which any
step reads from its ``config["configurable"]`` (a ``RunnableLambda`` taking ``config``),
so a retriever can keep to what the user may see; ``metadata`` holds ``raglab_case_id``
and ``raglab_user_id`` (the traces' tags). A turn of a conversation also has its history:
the input dict's ``chat_history`` (langchain-core ``HumanMessage``/``AIMessage``, the key a
``MessagesPlaceholder("chat_history")`` and LangChain's history-aware retrievers read; empty
on a first turn) and ``configurable["raglab_history"]`` (``{"role", "content"}`` dicts); a
chain invoked with the question itself (no ``system.input_field``) or a retriever cannot
take ``chat_history``, said once. A single-turn case's input and config are as before.
Hits: ``doc_id`` from ``metadata[system.doc_id_field]`` (then ``source``), ``text`` from
``page_content``, ``start`` from ``metadata["start_index"]`` (a splitter's
``add_start_index``), ``score`` from ``metadata["score"]``. Candidates are the documents
the chain's retrievers returned (seen through a callback handler), the context what the
chain's output says. The callback handler also counts the retriever and model calls
(``work.retrievals``, ``work.generations``; a retriever run inside another counts once)
and times them per stage (``retrieve``, ``generate``); usage tokens and the chat model's
name come from the responses' metadata. langchain-core is imported only when this system
is built (the optional extra ``langchain``: :func:`raglab.errors.install_line`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from raglab.components import NO_CONTEXT, BuildContext
from raglab.registry import register
from raglab.systems.base import SystemRequest
from raglab.systems.factory import FactoryCfg, FrameworkSystem, SaidOnce, StageClock, make_hit


class LangChainSystemCfg(FactoryCfg):
    name: Literal["langchain"]
    input_field: str | None = Field(None, description=(
        "invoke the runnable with {input_field: question} (create_retrieval_chain: input); "
        "null: with the question itself"))
    answer_field: str = Field("answer", min_length=1, description=(
        "the key of the runnable's output holding the answer"))
    context_field: str = Field("context", min_length=1, description=(
        "the key of the runnable's output holding the context Documents"))


@register("system", "langchain", config=LangChainSystemCfg)
class LangChainSystem(FrameworkSystem):
    """The user's LangChain retriever or retrieval chain, built by their factory."""

    framework = ("langchain", "langchain_core", "langchain")
    answering = "a retrieval chain"
    cfg: LangChainSystemCfg

    def __init__(self, cfg: LangChainSystemCfg, ctx: BuildContext = NO_CONTEXT):
        super().__init__(cfg, ctx)
        self._no_history = SaidOnce(
            "the pipeline is invoked with the question itself (a retriever, or no "
            "system.input_field): a turn's history cannot reach it as chat_history; it is "
            "in the config's configurable['raglab_history'] (set system.input_field=input "
            "to get chat_history in the input)")

    @classmethod
    def accepted(cls) -> tuple[tuple[type, ...], type, str]:
        from langchain_core.retrievers import BaseRetriever
        from langchain_core.runnables import Runnable

        return (BaseRetriever, Runnable), BaseRetriever, "a LangChain retriever or runnable"

    def answer(self, req: SystemRequest) -> Any:
        clock = StageClock()
        handler = _handler(clock)
        try:
            out = self._invoke(req, handler, run_config(req, [handler]))
        finally:
            clock.count(self.ctx.work)
        return self.finish(out, clock, req.case_id)

    def _invoke(self, req: SystemRequest, handler: Any, config: Any) -> dict[str, Any]:
        cfg = self.cfg
        if self.retriever_only or not cfg.input_field:
            if req.history:
                self._no_history()
            result = self.pipeline.invoke(req.question, config=config)
        else:
            arg: dict[str, Any] = {cfg.input_field: req.question}
            if req.conversation_id is not None:  # a turn (a single-turn input is as before)
                arg["chat_history"] = chat_history(req.history)
            result = self.pipeline.invoke(arg, config=config)
        if isinstance(result, list):  # a retriever, or a runnable that retrieves
            self._retrieval_note()
            hits = [self._hit(d) for d in result]
            return {"case_id": req.case_id, "candidates": hits, "context": hits,
                    "answer": None}
        answer, context = self._read(result, handler.retrieved)
        retrieved = handler.retrieved if handler.retrieved else context
        return {"case_id": req.case_id, "candidates": [self._hit(d) for d in retrieved],
                "context": [self._hit(d) for d in context], "answer": answer}

    def _read(self, result: Any, retrieved: list) -> tuple[str | None, list]:
        """(answer, context Documents) of the runnable's output."""
        cfg = self.cfg
        if isinstance(result, dict):
            if cfg.answer_field not in result:
                raise ValueError(f"the chain's output has no {cfg.answer_field!r} key "
                                 f"(system.answer_field; it has: {', '.join(map(str, result))})")
            answer = _text(result[cfg.answer_field])
            context = result.get(cfg.context_field)
            if context is None:
                context = retrieved
            if not isinstance(context, list):
                raise ValueError(f"the chain's output {cfg.context_field!r} is a "
                                 f"{type(context).__name__}, not a list of Documents")
            return answer, context
        return _text(result), retrieved

    def _hit(self, doc: Any) -> dict[str, Any]:
        meta = getattr(doc, "metadata", None)
        text = getattr(doc, "page_content", None)
        if not isinstance(meta, dict) or not isinstance(text, str):
            raise ValueError(f"the context holds a {type(doc).__name__}, not a LangChain "
                             "Document")
        # (not the vector store's own document id: that is no corpus id)
        return make_hit(meta, text, self.cfg.doc_id_field, start=meta.get("start_index"),
                        score=meta.get("score"))


def _text(value: Any) -> str | None:
    """An answer as text (a message's content; None stays None)."""
    if value is None or isinstance(value, str):
        return value
    content = getattr(value, "content", None)
    if isinstance(content, str):
        return content
    raise ValueError(f"the chain's answer is a {type(value).__name__}, not text")


def chat_history(history: tuple[dict[str, str], ...]) -> list[Any]:
    """A turn's history as langchain-core messages (``HumanMessage`` for the user's,
    ``AIMessage`` for the assistant's), in order."""
    from langchain_core.messages import AIMessage, HumanMessage

    return [HumanMessage(content=m["content"]) if m["role"] == "user"
            else AIMessage(content=m["content"]) for m in history]


def run_config(req: SystemRequest, callbacks: list) -> dict[str, Any]:
    """The ``RunnableConfig`` a case is invoked with: its user, filters and id in
    ``configurable`` (``raglab_user``, ``raglab_filters``, ``raglab_case_id``, and for a
    turn ``raglab_history``: its history as ``{"role", "content"}`` dicts), its id and
    user's id in ``metadata``, and ``callbacks``."""
    user = req.user.model_dump() if req.user is not None else None
    metadata: dict[str, Any] = {"raglab_case_id": req.case_id}
    if req.user is not None:
        metadata["raglab_user_id"] = req.user.id
    configurable: dict[str, Any] = {"raglab_user": user, "raglab_filters": dict(req.filters),
                                    "raglab_case_id": req.case_id}
    if req.conversation_id is not None:
        configurable["raglab_history"] = [dict(m) for m in req.history]
    return {"callbacks": callbacks, "metadata": metadata, "configurable": configurable}


def _handler(clock: StageClock) -> Any:
    """A callback handler counting and timing the retrievers and models of one invocation
    (a run inside another of the same stage is part of it), keeping the retrieved
    documents and the models' token usage (langchain-core imported here)."""
    from langchain_core.callbacks import BaseCallbackHandler

    class _Timings(BaseCallbackHandler):
        def __init__(self) -> None:
            self.retrieved: list = []
            self._parent: dict[Any, Any] = {}  # run -> its parent run
            self._stage: dict[Any, str] = {}  # retriever and model runs -> their stage

        def _begin(self, stage: str | None, run_id: Any, parent: Any) -> None:
            self._parent[run_id] = parent
            if stage is None:
                return
            self._stage[run_id] = stage
            nested, seen, up = False, set(), parent
            while up is not None and up not in seen:  # inside a run of the same stage?
                if self._stage.get(up) == stage:
                    nested = True
                    break
                seen.add(up)
                up = self._parent.get(up)
            clock.start(stage, run_id, nested=nested)

        def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, **kw):
            self._begin(None, run_id, parent_run_id)

        def on_tool_start(self, serialized, input_str, *, run_id, parent_run_id=None, **kw):
            self._begin(None, run_id, parent_run_id)

        def on_retriever_start(self, serialized, query, *, run_id, parent_run_id=None,
                               **kw):
            self._begin("retrieve", run_id, parent_run_id)

        def on_retriever_end(self, documents, *, run_id, **kw):
            if clock.end(run_id):  # (a nested retriever's documents are its parent's)
                self.retrieved.extend(documents)

        def on_chat_model_start(self, serialized, messages, *, run_id, parent_run_id=None,
                                **kw):
            self._begin("generate", run_id, parent_run_id)

        def on_llm_start(self, serialized, prompts, *, run_id, parent_run_id=None, **kw):
            self._begin("generate", run_id, parent_run_id)

        def on_llm_end(self, response, *, run_id, **kw):
            if not clock.end(run_id):
                return
            llm_output = response.llm_output or {}
            counted = False
            for gens in response.generations:
                for g in gens:
                    msg = getattr(g, "message", None)
                    usage = getattr(msg, "usage_metadata", None)
                    if usage:
                        clock.add_usage(usage.get("input_tokens"), usage.get("output_tokens"))
                        counted = True
                    model = (getattr(msg, "response_metadata", None) or {}).get("model_name")
                    if isinstance(model, str) and model:
                        clock.model = model
            tokens = llm_output.get("token_usage") or {}
            if not counted and tokens:
                clock.add_usage(tokens.get("prompt_tokens"), tokens.get("completion_tokens"))
            model = llm_output.get("model_name")
            if isinstance(model, str) and model and clock.model is None:
                clock.model = model

        def on_llm_error(self, error, *, run_id, **kw):
            clock.end(run_id)

        def on_retriever_error(self, error, *, run_id, **kw):
            clock.end(run_id)

    return _Timings()
