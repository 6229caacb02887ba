"""A turn's history through the LangChain and LlamaIndex adapters, with the history-aware
examples of docs/pipelines.md (``my_chat``: a chain that reads the input's
``chat_history``; ``my_chat_index``: a CondenseQuestionChatEngine) on the tiny conversation
set: with the history the follow-up turns find their evidence, without it (the same
pipeline told to ignore it; the LlamaIndex query engine itself) they find nothing, and the
first turns pass both ways."""

from __future__ import annotations

import json
import sys

import pytest

from raglab.data.conversation import flatten
from raglab.systems.base import SystemRequest
from tests.conftest import run_cli, write_jsonl
from tests.conversations.conftest import CONVERSATIONS, CORPUS
from tests.systems.test_pipelines import _example

FIRSTS = ["conv-1.t1", "conv-2.t1", "conv-3.t1"]
FOLLOW_UPS = ["conv-1.t2", "conv-2.t2"]
SYSTEM = {"my_chat": ["system=langchain", "system.input_field=input"],
          "my_chat_index": ["system=llamaindex"]}
WITHOUT = {"my_chat": "+system.options.history=false",
           "my_chat_index": "+system.options.chat=false"}


def _turns():
    return {c.id: c for i, conv in enumerate(CONVERSATIONS, start=1)
            for c in flatten(conv, file="conversations.jsonl", line=i)}


def build(tmp_path, monkeypatch, module: str, *overrides: str):
    """The adapter built in-process from the page's example ``module``, over the tiny
    conversation corpus."""
    from raglab import registry
    from raglab.commands.compose import compose_config
    from raglab.components import BuildContext
    from raglab.config import parse_run_config

    code, _ = _example(module)
    (tmp_path / f"{module}.py").write_text(code, encoding="utf-8")
    write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    cfg = parse_run_config(compose_config([
        *SYSTEM[module], f"system.factory={module}:build", "k=1",
        "+system.options.corpus=corpus.jsonl", "dataset.corpus=corpus.jsonl",
        "dataset.cases=corpus.jsonl", *overrides]))
    return registry.build("system", cfg.system, BuildContext(run=cfg))


def _found(system, cases) -> dict[str, list[str]]:
    """Case id -> the document ids of its context."""
    return {cid: [h.doc_id for h in system.answer(SystemRequest.from_case(case, {})).context]
            for cid, case in cases.items()}


GOLD = {"conv-1.t1": ["kb/refunds"], "conv-1.t2": ["kb/refunds"], "conv-2.t1": ["kb/exports"],
        "conv-2.t2": ["kb/exports"], "conv-3.t1": ["kb/refunds"]}


@pytest.mark.parametrize("module", ["my_chat", "my_chat_index"])
def test_the_documented_pipelines_resolve_follow_ups_with_the_history(
        tmp_path, monkeypatch, capsys, module):
    turns = _turns()
    cases = {cid: turns[cid] for cid in FIRSTS + FOLLOW_UPS}
    system = build(tmp_path, monkeypatch, module)
    with_history = _found(system, cases)
    assert with_history == GOLD
    # a single-turn case (no history at all) runs through the same pipeline
    single = system.answer(SystemRequest("s-1", "When do exports run?", {}, None, {}))
    assert [h.doc_id for h in single.context] == ["kb/exports"]
    capsys.readouterr()
    without = _found(build(tmp_path, monkeypatch, module, WITHOUT[module]), cases)
    assert {cid: without[cid] for cid in FIRSTS} == {cid: GOLD[cid] for cid in FIRSTS}
    assert [without[cid] for cid in FOLLOW_UPS] == [[], []]
    err = capsys.readouterr().err
    if module == "my_chat_index":  # a query engine: said once
        assert err.count("a query engine or retriever cannot take a conversation's "
                         "history") == 1


def _recall(run, ids):
    recs = {json.loads(x)["case_id"]: json.loads(x)
            for x in (run / "records.jsonl").read_text().splitlines()}
    return [recs[i]["metrics"]["final.evidence_recall"] for i in ids]


@pytest.mark.slow
@pytest.mark.parametrize("module", ["my_chat", "my_chat_index"])
def test_the_documented_commands_pass_follow_ups_only_with_the_history(tmp_path, module):
    code, cmd = _example(module)
    (tmp_path / f"{module}.py").write_text(code, encoding="utf-8")
    write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    write_jsonl(tmp_path / "conversations.jsonl", CONVERSATIONS)
    assert cmd[:2] == ["raglab", "run"]
    runs = {}
    for name, extra in (("with", []), ("without", [WITHOUT[module]])):
        proc = run_cli(*cmd[1:], *extra, "tracking=none", "grader=heuristic", "progress=off",
                       f"hydra.run.dir={tmp_path / name}", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[name] = (tmp_path / name, proc.stderr)
    assert _recall(runs["with"][0], FIRSTS) == [1.0, 1.0, 1.0]
    assert _recall(runs["with"][0], FOLLOW_UPS) == [1.0, 1.0]
    assert _recall(runs["without"][0], FIRSTS) == [1.0, 1.0, 1.0]
    assert _recall(runs["without"][0], FOLLOW_UPS) == [0.0, 0.0]
    said = "cannot take a conversation's history"
    assert runs["with"][1].count(said) == 0
    assert runs["without"][1].count(said) == (module == "my_chat_index")
    with_metrics = json.loads((runs["with"][0] / "metrics.json").read_text())
    without_metrics = json.loads((runs["without"][0] / "metrics.json").read_text())
    follow = with_metrics["slices"]["turn_kind"]["follow_up"]["final.evidence_recall"]
    assert follow == 1.0
    assert without_metrics["slices"]["turn_kind"]["follow_up"]["final.evidence_recall"] == 0.0
