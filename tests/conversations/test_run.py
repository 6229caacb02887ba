"""Conversations end to end through the CLI: a system that ignores the history fails the
follow-ups and passes first turns; one that uses it passes both; ``conversation.history``."""

from __future__ import annotations

import json
import textwrap

from tests.conftest import run_cli

# a word-overlap retriever of whole documents, answering with the best one's first
# sentence; option "history" says whether it reads the earlier user messages (it logs what
# it was given)
SYSTEM = textwrap.dedent('''
    import json, re

    WORDS = re.compile(r"[a-z0-9]+")
    STOP = {"and", "what", "about", "the", "on", "for", "how", "can", "i", "get", "them",
            "do", "to", "a", "is", "it", "my", "who", "long", "afterwards", "top", "was"}

    def words(t):
        return {w for w in WORDS.findall(t.lower()) if w not in STOP}

    class Chat:
        def __init__(self, options):
            self.use = options.get("history", True)
            self.docs = [json.loads(l) for l in open(options["corpus"])]
            self.seen = open(options["log"], "a")

        def answer(self, req):
            print(json.dumps({"case_id": req.case_id, "history": list(req.history),
                              "turn": req.turn}), file=self.seen, flush=True)
            asked = [m["content"] for m in req.history if m["role"] == "user"][-1:]
            q = words(" ".join((asked if self.use else []) + [req.question]))
            groups = set(req.user.groups) if req.user else set()
            docs = [d for d in self.docs if d.get("acl") is None or groups & set(d["acl"])]
            scored = sorted(((len(q & words(d["text"])), i) for i, d in enumerate(docs)),
                            reverse=True)
            hits = [{"doc_id": docs[i]["doc_id"], "text": docs[i]["text"]}
                    for n, i in scored[:1] if n > 0]
            return {"case_id": req.case_id, "candidates": hits, "context": hits,
                    "answer": hits[0]["text"].split(". ")[0] if hits else "I do not know."}

    def make(options):
        return Chat(options)
''')


def _run(tmp_path, convs, name, *extra):
    corpus, cases = convs
    (tmp_path / "chat_sut.py").write_text(SYSTEM)
    log = tmp_path / f"{name}.log"
    r = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                "dataset.labels=null", "system=python", "system._target_=chat_sut.make",
                f"+system.options.corpus={corpus}", f"+system.options.log={log}",
                "tracking=none", "grader=heuristic", f"hydra.run.dir={tmp_path / name}",
                *extra, cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    recs = {json.loads(line)["case_id"]: json.loads(line)
            for line in (tmp_path / name / "records.jsonl").read_text().splitlines()}
    seen = {json.loads(line)["case_id"]: json.loads(line)
            for line in log.read_text().splitlines()}
    return recs, seen


def _recall(recs, ids):
    return [recs[i]["metrics"].get("final.evidence_recall") for i in ids]


def test_ignoring_the_history_fails_the_follow_ups_and_passes_first_turns(tmp_path, convs):
    firsts, follow_ups = ["conv-1.t1", "conv-2.t1"], ["conv-1.t2", "conv-2.t2"]
    deaf, _ = _run(tmp_path, convs, "deaf", "+system.options.history=false")
    assert _recall(deaf, firsts) == [1.0, 1.0]
    assert _recall(deaf, follow_ups) == [0.0, 0.0]
    chat, seen = _run(tmp_path, convs, "chat")
    assert _recall(chat, firsts) == [1.0, 1.0]
    assert _recall(chat, follow_ups) == [1.0, 1.0]
    # the frozen prefix: the earlier questions and their reference answers
    assert seen["conv-2.t2"]["history"] == [
        {"role": "user", "content": "When do exports run?"},
        {"role": "assistant", "content": "Nightly at 02:00 UTC."}]
    assert seen["conv-2.t2"]["turn"] == 2 and seen["conv-2.t1"]["history"] == []
    assert chat["conv-2.t2"]["conversation"] == {"id": "conv-2", "turn": 2, "n_turns": 2,
                                                 "history": "reference"}
    # turns are sliced by their place, not by their conversation (the unit, not a slice)
    slices = json.loads((tmp_path / "chat" / "metrics.json").read_text())["slices"]
    assert {"turn", "turn_kind", "permission_change"} <= set(slices)
    assert "conversation" not in slices
    # the permission trap is checked at its turn: no leak; the granted turn finds it
    assert chat["conv-1.t3"]["metrics"]["acl_leak_rate"] == 0.0
    assert _recall(chat, ["conv-3.t2"]) == [1.0]


def test_own_history_gives_the_systems_own_earlier_answers(tmp_path, convs):
    recs, seen = _run(tmp_path, convs, "own", "conversation.history=own", "concurrency=4")
    said = recs["conv-1.t1"]["output"]["answer"]
    assert seen["conv-1.t2"]["history"][1] == {"role": "assistant", "content": said}
    assert said != "Within 5 business days."  # not the reference answer
    assert [m["role"] for m in seen["conv-1.t3"]["history"]] == ["user", "assistant"] * 2
    assert recs["conv-1.t2"]["conversation"]["history"] == "own"
    assert recs["conv-1.t2"]["conversation"]["messages"] == seen["conv-1.t2"]["history"]


def test_a_resumed_own_history_run_gives_the_recorded_answers(tmp_path, convs):
    recs, _ = _run(tmp_path, convs, "own", "conversation.history=own")
    path = tmp_path / "own" / "records.jsonl"
    first = json.loads(path.read_text().splitlines()[0])
    assert first["case_id"] == "conv-1.t1"
    first["output"]["answer"] = "Refunds: five business days, I recorded."
    path.write_text(json.dumps(first) + "\n")  # every later turn is to run again
    (tmp_path / "own.log").unlink()
    recs, seen = _run(tmp_path, convs, "own", "conversation.history=own")
    assert "conv-1.t1" not in seen  # kept, not asked again
    assert seen["conv-1.t2"]["history"][1]["content"] == "Refunds: five business days, I recorded."


def test_a_sequential_run_of_conversations_is_refused_in_one_line(tmp_path, convs):
    _run(tmp_path, convs, "base")
    corpus, cases = convs
    r = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                "dataset.labels=null", "tracking=none", f"hydra.run.dir={tmp_path / 'seq'}",
                f"sequential.against={tmp_path / 'base'}", cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "is a conversation's turn" in lines[0], r.stderr
