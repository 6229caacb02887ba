"""A framework call is nested in another of its stage only when it descends from it
(LlamaIndex: parent spans; LangChain: parent run ids): calls side by side, as an async
pipeline makes them in one thread, each count and are timed, and a call that raised ends
so that later calls count again. Through the real libraries, offline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import NodeWithScore, TextNode

from raglab.systems import llamaindex
from raglab.systems.factory import StageClock
from tests.systems.test_pipeline_cases import _ask, _build


class Retriever(BaseRetriever):
    """One node; or what ``inner`` retrieves; or a failure."""

    def __init__(self, inner: BaseRetriever | None = None, fail: bool = False) -> None:
        self.inner, self.fail = inner, fail
        super().__init__()

    def _retrieve(self, query_bundle: Any) -> list[NodeWithScore]:
        if self.fail:
            raise RuntimeError("the store is down")
        if self.inner is not None:
            return self.inner.retrieve(query_bundle)
        node = TextNode(text="Refunds take 5 days.", metadata={"doc_id": "kb/a"})
        return [NodeWithScore(node=node, score=1.0)]

    async def _aretrieve(self, query_bundle: Any) -> list[NodeWithScore]:
        await asyncio.sleep(0.005)  # so that the two calls overlap
        return self._retrieve(query_bundle)


class SlowLLM(CustomLLM):  # a chat model whose chat goes through complete
    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="slow-llm", is_chat_model=True)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kw: Any) -> CompletionResponse:
        return CompletionResponse(text="Five days.")

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False,
                        **kw: Any) -> CompletionResponse:
        await asyncio.sleep(0.005)
        return CompletionResponse(text="Five days.")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kw: Any) -> Any:
        raise NotImplementedError


def _clocked(run: Callable[[], Any]) -> StageClock:
    """The clock of the LlamaIndex calls ``run`` makes, as one answer's."""
    llamaindex._listen()
    clock = llamaindex._LOCAL.clock = StageClock()
    try:
        run()
    finally:
        llamaindex._LOCAL.clock = None
    return clock


def test_llamaindex_calls_side_by_side_each_count_and_are_timed():
    async def two_retrievals() -> None:
        await asyncio.gather(Retriever().aretrieve("q"), Retriever().aretrieve("q"))

    async def two_chats() -> None:
        from llama_index.core.llms import ChatMessage

        llm = SlowLLM()
        await asyncio.gather(llm.acomplete("a"), llm.acomplete("b"),
                             llm.achat([ChatMessage(content="c")]))

    clock = _clocked(lambda: asyncio.run(two_retrievals()))
    assert clock.calls["retrieve"] == 2  # was 1: the second was taken as nested
    assert clock.ms["retrieve"] >= 2 * 5  # both timed (their times add up)
    clock = _clocked(lambda: asyncio.run(two_chats()))
    # the chat call's completion call is inside it, the three calls beside each other
    assert clock.calls["generate"] == 3  # was 1


def test_llamaindex_a_retriever_inside_a_retriever_still_counts_once():
    clock = _clocked(lambda: Retriever(Retriever(Retriever())).retrieve("q"))
    assert clock.calls["retrieve"] == 1
    clock = _clocked(lambda: asyncio.run(Retriever(Retriever()).aretrieve("q")))
    assert clock.calls["retrieve"] == 1


def test_llamaindex_a_call_that_raised_ends_and_later_calls_count():
    def fail_then_two() -> None:
        try:
            Retriever(fail=True).retrieve("q")
        except RuntimeError:
            pass
        Retriever().retrieve("q")
        Retriever().retrieve("q")

    clock = _clocked(fail_then_two)
    assert clock.calls["retrieve"] == 3  # was 1: the failed call stayed open
    assert clock.ms["retrieve"] > 0


GATHERING_ENGINE = '''
import asyncio

from llama_index.core.base.response.schema import Response
from llama_index.core.query_engine import CustomQueryEngine

from gathering_parts import Retriever


class Gathering(CustomQueryEngine):  # two retrievals side by side, as use_async=True does
    def custom_query(self, query_str):
        return asyncio.run(self.acustom_query(query_str))

    async def acustom_query(self, query_str):
        a, b = await asyncio.gather(Retriever().aretrieve(query_str),
                                    Retriever().aretrieve(query_str))
        return Response(response="Five days.", source_nodes=a + b)


def build(config):
    return Gathering()
'''


def test_llamaindex_an_async_engine_counts_each_retrieval_of_each_case(tmp_path,
                                                                      monkeypatch):
    import inspect
    import sys

    (tmp_path / "gathering_parts.py").write_text(
        "import asyncio\nfrom typing import Any\n"
        "from llama_index.core.base.base_retriever import BaseRetriever\n"
        "from llama_index.core.schema import NodeWithScore, TextNode\n\n\n"
        + inspect.getsource(Retriever), encoding="utf-8")
    monkeypatch.delitem(sys.modules, "gathering_parts", raising=False)
    system, work, _ = _build(tmp_path, monkeypatch, "llamaindex", "gathering_engine",
                             GATHERING_ENGINE)
    for case in ("c-1", "c-2"):
        out = _ask(system, case, "How fast are refunds?")
        assert len(out.context) == 2 and out.latency_ms["retrieve"] > 0
    assert work.retrievals == 4  # was 2


def test_langchain_nests_by_parent_runs_and_ends_a_call_that_raised():
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever as LCRetriever
    from langchain_core.runnables import RunnableLambda, RunnableParallel

    from raglab.systems.langchain import _handler

    class LCR(LCRetriever):
        fail: bool = False
        inner: Any = None

        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list:
            if self.fail:
                raise RuntimeError("the store is down")
            if self.inner is not None:
                return self.inner.invoke(query, config={"callbacks": run_manager.get_child()})
            return [Document(page_content="Refunds take 5 days.")]

    def fail_then_two(query: str, config: Any) -> None:
        try:
            LCR(fail=True).invoke(query, config=config)
        except RuntimeError:
            pass
        LCR().invoke(query, config=config)
        LCR().invoke(query, config=config)

    for runnable, calls in ((RunnableParallel(a=LCR(), b=LCR()), 2),  # side by side
                            (LCR(inner=LCR(inner=LCR())), 1),  # inside each other
                            (RunnableLambda(fail_then_two), 3)):
        clock = StageClock()
        runnable.invoke("q", config={"callbacks": [_handler(clock)]})
        assert clock.calls["retrieve"] == calls
