"""Conversation lines flatten into turn cases: ids, tags, history, users, errors."""

from __future__ import annotations

import copy
import json

import pytest

from raglab.data.dataset import load_dataset
from raglab.errors import UserError
from tests.conftest import write_jsonl
from tests.conversations.conftest import CONVERSATIONS, CORPUS


def test_turns_become_cases_with_their_place_and_frozen_history(convs):
    ds = load_dataset(*convs)
    assert [c.id for c in ds.cases] == ["conv-1.t1", "conv-1.t2", "conv-1.t3", "conv-2.t1",
                                         "conv-2.t2", "conv-3.t1", "conv-3.t2"]
    t2 = ds.cases[1]
    assert t2.tags == {"intent": "refunds", "conversation": "conv-1", "turn": "2",
                       "turn_kind": "follow_up"}
    assert t2.user is not None and t2.user.id == "u1"  # the conversation's user
    assert [m.model_dump() for m in t2.conversation.history] == [
        {"role": "user", "content": "How long do refunds take to reach the card?"},
        {"role": "assistant", "content": "Within 5 business days."}]
    assert ds.cases[2].tags["turn_kind"] == "topic_shift"
    assert len(ds.cases[2].conversation.history) == 4
    # a turn's user holds from then on, and a changed user is a permission change
    t32 = ds.cases[6]
    assert t32.user.groups == ["customer", "staff"] and t32.conversation.permission_change
    assert t32.tags["permission_change"] == "yes" and "permission_change" not in ds.cases[5].tags
    assert [n.from_turn for n in t32.nuggets] == [None, 1]
    assert not ds.quarantined


def test_single_turn_cases_are_unchanged_beside_conversations(tmp_path):
    case = {"id": "s-1", "question": "When do exports run?",
            "evidence": [{"doc_id": "kb/exports", "quote": "Exports run nightly"}],
            "nuggets": [{"text": "nightly", "vital": True}]}
    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    ds = load_dataset(corpus, write_jsonl(tmp_path / "c.jsonl", [case, CONVERSATIONS[1]]))
    single = ds.cases[0]
    assert single.conversation is None
    assert "conversation" not in single.model_dump(exclude_defaults=False)
    assert "from_turn" not in json.dumps(single.model_dump())


def _error(tmp_path, conv) -> str:
    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    cases = write_jsonl(tmp_path / "c.jsonl", [CONVERSATIONS[1], conv])
    with pytest.raises(UserError) as e:
        load_dataset(corpus, cases)
    return str(e.value)


@pytest.mark.parametrize("change, expected", [
    (lambda c: c["turns"][1].pop("question"), "c.jsonl:2 case conv-x.t2: missing field 'question'"),
    (lambda c: c["turns"][0].pop("reference_answer"),
     "c.jsonl:2 case conv-x.t1: every turn but the last needs a reference_answer"),
    (lambda c: c["turns"][1].update(follow_up=True, topic_shift=True),
     "c.jsonl:2 case conv-x.t2: a turn is marked both follow_up and topic_shift"),
    (lambda c: c["turns"][0].update(follow_up=True),
     "c.jsonl:2 case conv-x.t1: the first turn cannot be a follow_up"),
    (lambda c: c["turns"][1]["tags"].update(turn="9"),
     "c.jsonl:2 case conv-x.t2: tag key 'turn' is reserved in a conversation"),
    (lambda c: c["turns"][1]["nuggets"].append({"text": "x", "from_turn": 2}),
     "c.jsonl:2 case conv-x.t2: nuggets[1].from_turn=2 is not an earlier turn"),
    (lambda c: c["turns"][1].update(colour="red"),
     "c.jsonl:2 case conv-x.t2: unknown field 'colour'"),
    (lambda c: c.update(turns=[]), "c.jsonl:2 case conv-x: field 'turns'"),
])
def test_a_bad_turn_is_one_error_naming_file_line_and_turn(tmp_path, change, expected):
    conv = copy.deepcopy(CONVERSATIONS[0])
    conv["id"] = "conv-x"
    conv["turns"][1].setdefault("tags", {})
    change(conv)
    assert expected in _error(tmp_path, conv)


def test_a_duplicate_turn_id_names_both_lines(tmp_path):
    clash = {"id": "conv-2.t1", "question": "q?"}
    msg = _error(tmp_path, clash)
    assert "c.jsonl:2 case conv-2.t1: duplicate case id (first on line 1)" in msg


def test_a_turns_missing_quote_is_quarantined_with_its_line(tmp_path):
    conv = copy.deepcopy(CONVERSATIONS[1])
    conv["turns"][1]["evidence"][0]["quote"] = "kept for ninety days in the vault"
    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    ds = load_dataset(corpus, write_jsonl(tmp_path / "c.jsonl", [CONVERSATIONS[0], conv]))
    assert [(q.case_id, q.line, q.kind) for q in ds.quarantined] == [
        ("conv-2.t2", 2, "quote_not_found")]
    assert "conv-2.t1" in {c.id for c in ds.cases}


def test_from_turn_outside_a_conversation_is_refused(tmp_path):
    case = {"id": "s-1", "question": "q?", "nuggets": [{"text": "x", "from_turn": 1}]}
    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    with pytest.raises(UserError, match="only a conversation's turn"):
        load_dataset(corpus, write_jsonl(tmp_path / "c.jsonl", [case]))


def test_cases_add_appends_a_conversation_and_refuses_a_bad_turn(tmp_path, convs):
    from tests.conftest import run_cli

    corpus, cases = convs
    new = copy.deepcopy(CONVERSATIONS[1])
    new["id"] = "conv-9"
    bad = copy.deepcopy(CONVERSATIONS[1])
    bad["id"] = "conv-8"
    bad["turns"][1]["evidence"][0]["quote"] = "kept in the vault for ninety days"
    err = {}
    for name, rows, code in (("bad", [bad], 2), ("new", [new], 0)):
        f = write_jsonl(tmp_path / "new.jsonl", rows)
        r = run_cli("cases", "add", str(f), f"dataset.corpus={corpus}",
                    f"dataset.cases={cases}", "dataset.labels=null", cwd=tmp_path)
        assert r.returncode == code, r.stderr
        err[name] = r.stderr
    assert "new.jsonl:1 case conv-8.t2: evidence 0: quote not found" in err["bad"]
    ds = load_dataset(corpus, cases)
    assert [c.id for c in ds.cases][-2:] == ["conv-9.t1", "conv-9.t2"]
    # counted in cases, as validate and run count them (was "added 1 case(s) ... (now 4)":
    # lines, with 9 cases in the set)
    assert len(ds.cases) == 9
    assert r.stdout.strip() == f"added 2 case(s) (1 conversation(s): 2 turns) to {cases} (now 9)"


def test_a_single_turn_line_cannot_set_conversation(tmp_path):
    case = {"id": "s-1", "question": "q?", "conversation": {"id": "x", "turn": 1, "n_turns": 1}}
    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    with pytest.raises(UserError, match="c.jsonl:1 case s-1: field 'conversation' is set by"):
        load_dataset(corpus, write_jsonl(tmp_path / "c.jsonl", [case]))


def test_the_same_groups_in_another_order_are_no_permission_change(tmp_path):
    conv = copy.deepcopy(CONVERSATIONS[0])
    conv["user"] = {"id": "u1", "groups": ["customer", "beta"]}
    conv["turns"][1]["user"] = {"id": "u1", "groups": ["beta", "customer"]}
    conv["turns"][2]["user"] = {"id": "u1", "groups": ["beta", "customer", "staff"]}
    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    ds = load_dataset(corpus, write_jsonl(tmp_path / "c.jsonl", [conv]))
    assert [c.conversation.permission_change for c in ds.cases] == [False, False, True]
