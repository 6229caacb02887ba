"""A drafted conversation is reviewed turn by turn and added whole."""

from __future__ import annotations

import copy
import json

from tests.conftest import run_cli, write_jsonl
from tests.conversations.conftest import CONVERSATIONS


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
