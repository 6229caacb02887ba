"""A drafted conversation is reviewed turn by turn and added whole."""

from __future__ import annotations

import copy
import json

from tests.conftest import run_cli, write_jsonl
from tests.conversations.conftest import CONVERSATIONS, CORPUS


def test_a_conversation_draft_is_shown_turn_by_turn_and_added(tmp_path, convs):
    corpus, cases = convs
    draft = copy.deepcopy(CONVERSATIONS[1])
    draft.update(id="drafted-c1", needs_review=True,
                 draft={"from": "corpus", "corpus": str(corpus), "kind": "lookup",
                        "documents": ["kb/exports"]})
    draft["turns"][1]["nuggets"].append({"text": "exports run at night", "from_turn": 1})
    drafts = write_jsonl(tmp_path / "drafts.jsonl", [draft])
    p = run_cli("cases", "review", str(drafts), cwd=tmp_path, input_text="a\n")
    assert p.returncode == 0, p.stderr
    assert "-- turn 1 of 2 --" in p.stdout and "-- turn 2 of 2 (follow_up) --" in p.stdout
    assert "question: And for how long can I get them afterwards?" in p.stdout
    assert ">>>stay downloadable for 30 days<<<" in p.stdout
    assert "(from turn 1) exports run at night" in p.stdout
    accepted = tmp_path / "drafts.accepted.jsonl"
    assert [json.loads(x)["id"] for x in accepted.read_text().splitlines()] == ["drafted-c1"]
    p = run_cli("cases", "add", str(accepted), f"dataset.corpus={corpus}",
                f"dataset.cases={cases}", "dataset.labels=null", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "drafted-c1" in cases.read_text().splitlines()[-1]


def test_an_edited_conversation_is_checked_turn_by_turn(tmp_path, convs):
    from raglab.cases.review import Review
    from raglab.data.dataset import load_corpus

    corpus, _ = convs
    drafts = write_jsonl(tmp_path / "drafts.jsonl", [CONVERSATIONS[1]])
    review = Review(drafts, tmp_path / "ok.jsonl", load_corpus(corpus))
    edited = copy.deepcopy(CONVERSATIONS[1])
    assert review.check(edited) is None
    edited["turns"][1]["evidence"][0]["quote"] = "downloadable for 30 days"
    assert review.check(edited) is None  # trimmed: its offsets found again
    edited["turns"][1]["evidence"][0]["quote"] = "kept for ninety days"
    assert review.check(edited) == ("conv-2.t2: evidence 0: quote not found in document "
                                    "'kb/exports'")
    edited["turns"][1]["evidence"][0]["quote"] = "stay downloadable for 30 days"
    edited["turns"][0].pop("reference_answer")
    assert review.check(edited).startswith("conv-2.t1: every turn but the last needs")


# an editor that, on its first call, writes a number as turn 2's quote, then the quote
# trimmed (a valid edit whose offsets are found again)
EDIT_TURN = """import json, pathlib, sys
calls, path = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
n = int(calls.read_text()) + 1 if calls.exists() else 1
calls.write_text(str(n))
calls.with_name("names.txt").open("a").write(path.name + "\\n")
case = json.loads(path.read_text())
case["turns"][1]["evidence"][0]["quote"] = 5 if n == 1 else "downloadable for 30 days"
path.write_text(json.dumps(case))
"""


def test_an_edit_of_a_conversation_with_a_slash_in_its_id_and_a_bad_quote(tmp_path, convs):
    """A conversation's id with a '/' (the editor's file was named after it: a traceback,
    the file not found) and an edited turn whose quote is not text (placed before the
    turn's schema was checked: a traceback) are one 'not saved' line, then edited again."""
    import sys

    corpus, _ = convs
    draft = copy.deepcopy(CONVERSATIONS[1])
    draft.update(id="exports/chat\t1", needs_review=True)
    drafts = write_jsonl(tmp_path / "drafts.jsonl", [draft])
    editor = tmp_path / "edit.py"
    editor.write_text(EDIT_TURN)
    p = run_cli("cases", "review", str(drafts), "--corpus", str(corpus), cwd=tmp_path,
                input_text="e\ne\na\n", env={"VISUAL": "", "EDITOR": (
                    f"{sys.executable} {editor} {tmp_path / 'calls.txt'}")})
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    assert ("not saved: exports/chat\\x091.t2: field 'evidence.0.quote': Input should be a "
            "valid string") in p.stdout, p.stdout
    assert (tmp_path / "names.txt").read_text().splitlines() == ["exports-chat-1.json"] * 2
    accepted = [json.loads(x) for x in
                (tmp_path / "drafts.accepted.jsonl").read_text().splitlines()]
    assert accepted[0]["id"] == "exports/chat\t1"
    ev = accepted[0]["turns"][1]["evidence"][0]
    text = next(d["text"] for d in CORPUS if d["doc_id"] == "kb/exports")
    assert text[ev["start"]:ev["end"]] == ev["quote"] == "downloadable for 30 days"
