"""What each adapter hands a system for a turn of a conversation, and that a single-turn
case's input is what it was: LangChain's input ``chat_history`` and
``configurable["raglab_history"]``, LlamaIndex's chat engine (its memory reset, one case at
a time when built once), the http body's ``messages`` (a real local server) and replay's
lines matched by the turn's case id."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from raglab.data.conversation import flatten
from raglab.systems.base import SystemRequest
from tests.conftest import run_cli, write_jsonl
from tests.conversations.conftest import CONVERSATIONS, CORPUS

SINGLE = SystemRequest("t-1", "How fast are refunds paid back?", {}, None, {})


def _turns() -> dict:
    return {c.id: SystemRequest.from_case(c, {"k": 1})
            for i, conv in enumerate(CONVERSATIONS, start=1)
            for c in flatten(conv, file="conversations.jsonl", line=i)}


def _build(tmp_path, monkeypatch, system: str, code: str, *overrides: str):
    from raglab import registry
    from raglab.commands.compose import compose_config
    from raglab.components import BuildContext
    from raglab.config import parse_run_config

    (tmp_path / "my_app.py").write_text(code, encoding="utf-8")
    write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_app", raising=False)
    cfg = parse_run_config(compose_config([
        f"system={system}", "system.factory=my_app:build", "dataset.corpus=corpus.jsonl",
        "dataset.cases=corpus.jsonl", *overrides]))
    return registry.build("system", cfg.system, BuildContext(run=cfg)), sys.modules["my_app"]


# ---- LangChain ---------------------------------------------------------------------------
RECORDING_CHAIN = '''
from langchain_core.runnables import RunnableLambda

SEEN = []

def build(config):
    def record(x, config):
        SEEN.append((x, {k: v for k, v in config["configurable"].items()
                         if k.startswith("raglab_")}))
        return {"answer": "ok", "context": []}
    return RunnableLambda(record)
'''


def test_langchain_a_turn_gets_chat_history_and_a_single_turn_input_is_unchanged(
        tmp_path, monkeypatch, capsys):
    from langchain_core.messages import AIMessage, HumanMessage

    system, app = _build(tmp_path, monkeypatch, "langchain", RECORDING_CHAIN,
                         "system.input_field=input")
    turns = _turns()
    for req in (SINGLE, turns["conv-1.t1"], turns["conv-1.t3"]):
        system.answer(req)
    (single, single_conf), (first, first_conf), (third, third_conf) = app.SEEN
    # a single-turn case: the input and the config as before, nothing added
    assert single == {"input": "How fast are refunds paid back?"}
    assert set(single_conf) == {"raglab_user", "raglab_filters", "raglab_case_id"}
    # a first turn: an empty history; a third: two questions and their reference answers
    assert first == {"input": turns["conv-1.t1"].question, "chat_history": []}
    assert first_conf["raglab_history"] == []
    history = third["chat_history"]
    assert [type(m) for m in history] == [HumanMessage, AIMessage] * 2
    assert [m.content for m in history] == [
        "How long do refunds take to reach the card?", "Within 5 business days.",
        "And what about the charge on top?", "The refund fee is waived for Pro plans."]
    assert third["input"] == "Who handles payment incidents?"
    assert third_conf["raglab_history"] == list(turns["conv-1.t3"].history)
    assert third_conf["raglab_user"] == {"id": "u1", "groups": ["customer"]}
    assert "chat_history" not in capsys.readouterr().err


def test_langchain_a_chain_taking_the_question_itself_says_once_that_history_cannot_reach_it(
        tmp_path, monkeypatch, capsys):
    system, app = _build(tmp_path, monkeypatch, "langchain", RECORDING_CHAIN)
    turns = _turns()
    for cid in ("conv-1.t1", "conv-1.t2", "conv-1.t3", "conv-2.t2"):
        system.answer(turns[cid])
    system.answer(SINGLE)
    assert [x for x, _ in app.SEEN] == [turns[c].question for c in (
        "conv-1.t1", "conv-1.t2", "conv-1.t3", "conv-2.t2")] + [SINGLE.question]
    # the history is still in the config, for a step that reads it
    assert app.SEEN[2][1]["raglab_history"] == list(turns["conv-1.t3"].history)
    err = capsys.readouterr().err
    assert err.count("a turn's history cannot reach it as chat_history") == 1


# ---- LlamaIndex --------------------------------------------------------------------------
DUCK_CHAT = '''
from llama_index.core.base.response.schema import Response
from llama_index.core.schema import NodeWithScore, TextNode


class Chat:  # anything with chat(message, chat_history=...)
    def __init__(self):
        self.calls, self.resets = [], 0

    def reset(self):
        self.resets += 1

    def chat(self, message, chat_history=None):
        self.calls.append((message, chat_history))
        node = TextNode(text="Refunds are paid back to the original card within 5 business "
                        "days.", metadata={"doc_id": "kb/refunds"})
        return Response(response="Within 5 business days.",
                        source_nodes=[NodeWithScore(node=node, score=1.0)])


ENGINE = Chat()


def build(config):
    return ENGINE
'''


def test_llamaindex_a_chat_engine_is_asked_with_the_history_as_chat_messages(
        tmp_path, monkeypatch):
    from llama_index.core.llms import MessageRole

    system, app = _build(tmp_path, monkeypatch, "llamaindex", DUCK_CHAT)
    turns = _turns()
    out = system.answer(turns["conv-1.t2"])
    assert out.answer == "Within 5 business days." and out.context[0].doc_id == "kb/refunds"
    system.answer(SINGLE)
    (question, history), (single, none) = app.ENGINE.calls
    assert question == "And what about the charge on top?"
    assert [(m.role, m.content) for m in history] == [
        (MessageRole.USER, "How long do refunds take to reach the card?"),
        (MessageRole.ASSISTANT, "Within 5 business days.")]
    assert single == SINGLE.question and none == []
    assert app.ENGINE.resets == 2  # its memory reset before each case


CONDENSE_ONCE = '''
from llama_index.core import PromptTemplate
from llama_index.core.chat_engine import CondenseQuestionChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever

QUERIES = []


class Recording(BaseRetriever):
    def _retrieve(self, query_bundle):
        QUERIES.append(query_bundle.query_str)
        return []


def build(config):
    engine = RetrieverQueryEngine.from_args(Recording(), llm=MockLLM(max_tokens=4))
    if config["options"].get("query_engine"):
        return engine
    chat = CondenseQuestionChatEngine.from_defaults(
        engine, condense_question_prompt=PromptTemplate("{chat_history} | {question}"),
        llm=MockLLM())
    if config["options"].get("function"):  # a function returning the same engine each time
        return lambda filters, user: chat
    return chat
'''


@pytest.mark.parametrize("how", [[], ["+system.options.function=true"]])
def test_llamaindex_a_chat_engine_built_once_keeps_no_memory_of_other_cases(
        tmp_path, monkeypatch, capsys, how):
    system, app = _build(tmp_path, monkeypatch, "llamaindex", CONDENSE_ONCE, *how)
    turns = _turns()
    order = ["conv-1.t1", "conv-1.t2", "conv-2.t1", "conv-2.t2"]
    for cid in order:
        system.answer(turns[cid])
    # a first turn is asked alone (the memory of conv-1 reset), a follow-up with its history
    assert app.QUERIES[0] == turns["conv-1.t1"].question
    assert app.QUERIES[2] == turns["conv-2.t1"].question
    assert app.QUERIES[3] == ("user: When do exports run?\nassistant: Nightly at 02:00 UTC."
                              " | And for how long can I get them afterwards?")
    # side by side, each case still sees only its own history
    app.QUERIES.clear()
    threads = [threading.Thread(target=system.answer, args=(turns[cid],), daemon=True)
               for cid in order * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)  # (one engine's memory, unlocked, hangs)
    assert sorted(app.QUERIES) == sorted(
        [turns["conv-1.t1"].question, app_query_1(turns), turns["conv-2.t1"].question,
         app_query_2(turns)] * 3)
    assert "cannot take a conversation's history" not in capsys.readouterr().err


def app_query_1(turns):
    return ("user: How long do refunds take to reach the card?\nassistant: Within 5 business "
            "days. | " + turns["conv-1.t2"].question)


def app_query_2(turns):
    return ("user: When do exports run?\nassistant: Nightly at 02:00 UTC. | "
            + turns["conv-2.t2"].question)


def test_llamaindex_a_query_engine_says_once_that_it_cannot_take_the_history(
        tmp_path, monkeypatch, capsys):
    system, app = _build(tmp_path, monkeypatch, "llamaindex", CONDENSE_ONCE,
                         "+system.options.query_engine=true")
    turns = _turns()
    for cid in ("conv-1.t1", "conv-1.t2", "conv-2.t2"):
        system.answer(turns[cid])
    system.answer(SINGLE)
    assert app.QUERIES == [turns[c].question for c in ("conv-1.t1", "conv-1.t2", "conv-2.t2")] \
        + [SINGLE.question]
    err = capsys.readouterr().err
    assert err.count("a query engine or retriever cannot take a conversation's history") == 1


# ---- http --------------------------------------------------------------------------------
def test_http_a_turns_body_has_messages_ending_with_the_question_and_single_turn_is_unchanged():
    from raglab.systems.http import HttpSystem, HttpSystemCfg

    bodies: dict[str, dict] = {}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies[body["case_id"]] = body
            data = json.dumps({"candidates": [], "context": [], "answer": "ok"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        sut = HttpSystem(HttpSystemCfg(name="http", url=f"http://127.0.0.1:{srv.server_port}/",
                                       retries=0))
        turns = _turns()
        for req in (SINGLE, turns["conv-1.t1"], turns["conv-1.t3"]):
            sut.answer(req)
    finally:
        srv.shutdown()
        srv.server_close()
    assert list(bodies["t-1"]) == ["case_id", "question", "filters", "user", "config"]
    third = bodies["conv-1.t3"]
    assert third["messages"][-1] == {"role": "user", "content": "Who handles payment incidents?"}
    assert third["messages"][:-1] == third["history"] == [
        {"role": "user", "content": "How long do refunds take to reach the card?"},
        {"role": "assistant", "content": "Within 5 business days."},
        {"role": "user", "content": "And what about the charge on top?"},
        {"role": "assistant", "content": "The refund fee is waived for Pro plans."}]
    assert (third["conversation_id"], third["turn"]) == ("conv-1", 3)
    first = bodies["conv-1.t1"]
    assert first["history"] == [] and first["messages"] == [
        {"role": "user", "content": "How long do refunds take to reach the card?"}]


# ---- replay ------------------------------------------------------------------------------
GIVEN = [{"role": "user", "content": "When do exports run?"},
         {"role": "assistant", "content": "Nightly at 02:00 UTC."}]


def _line(cid, doc, history=None):
    out = {"case_id": cid, "candidates": [{"doc_id": doc["doc_id"], "text": doc["text"]}],
           "context": [{"doc_id": doc["doc_id"], "text": doc["text"]}],
           "answer": doc["text"].split(". ")[0]}
    if history is not None:
        out["history"] = history
    return out


def _replay_file(tmp_path):
    refunds, exports = CORPUS[0], CORPUS[1]
    return write_jsonl(tmp_path / "outputs.jsonl", [
        _line("conv-2.t2", exports, GIVEN), _line("conv-1.t1", refunds, []),
        _line("conv-1.t2", exports, []), _line("conv-2.t1", exports)])


def test_replay_a_line_with_history_is_read_for_its_turn_with_the_history_in_extra(
        tmp_path, convs, capsys):
    from raglab import registry
    from raglab.commands.compose import compose_config
    from raglab.components import BuildContext
    from raglab.config import parse_run_config
    from raglab.data.dataset import load_dataset

    corpus, cases = convs
    replay = _replay_file(tmp_path)
    cfg = parse_run_config(compose_config([
        "system=replay", f"system.path={replay}", f"dataset.corpus={corpus}",
        f"dataset.cases={cases}", "dataset.labels=null"]))
    dataset = load_dataset(corpus, cases)
    system = registry.build("system", cfg.system, BuildContext(run=cfg, dataset=dataset))
    turns = _turns()
    out = system.answer(turns["conv-2.t2"])
    out = out if isinstance(out, dict) else out.model_dump()
    assert out["extra"] == {"history": GIVEN} and out["context"][0]["doc_id"] == "kb/exports"
    first = system.answer(turns["conv-1.t1"])
    first = first if isinstance(first, dict) else first.model_dump()
    assert first["extra"] == {"history": []} and first["context"][0]["doc_id"] == "kb/refunds"
    plain = system.answer(turns["conv-2.t1"])
    plain = plain if isinstance(plain, dict) else plain.model_dump()
    assert "extra" not in plain
    with pytest.raises(LookupError):
        system.answer(turns["conv-3.t1"])  # no line for that turn


@pytest.mark.slow
def test_replay_pairs_lines_by_the_turns_case_id_and_keeps_their_history_in_extra(
        tmp_path, convs):
    corpus, cases = convs
    given, replay = GIVEN, _replay_file(tmp_path)
    proc = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                   "dataset.labels=null", "system=replay", f"system.path={replay}",
                   "tracking=none", "grader=none", "progress=off",
                   f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    recs = {json.loads(x)["case_id"]: json.loads(x)
            for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()}
    assert recs["conv-2.t2"]["output"]["extra"] == {"history": given}
    assert recs["conv-1.t1"]["output"]["extra"] == {"history": []}
    assert "extra" not in recs["conv-2.t1"]["output"]
    assert {cid: recs[cid]["metrics"]["final.evidence_recall"] for cid in (
        "conv-1.t1", "conv-1.t2", "conv-2.t1", "conv-2.t2")} == {
        "conv-1.t1": 1.0, "conv-1.t2": 0.0, "conv-2.t1": 1.0, "conv-2.t2": 1.0}
    assert recs["conv-3.t1"]["error"].startswith("system: LookupError")  # no line for it
    assert proc.stderr.count("history") == 1  # the one warning naming the added field

