"""``raglab cases draft --follow-ups N``: each answerable draft is asked for N follow-up
turns against the local model stand-in; the ones whose evidence can be placed are written
with the draft as a conversation (verbatim quotes, ``follow_up: true``), a follow-up citing
a sentence never shown is dropped and counted, with the ones after it."""

from __future__ import annotations

import json
import random

from raglab.cases import draft_corpus as dc
from raglab.cases import draft_follow as df
from raglab.data.dataset import load_corpus
from raglab.data.schema import Case, Document
from tests.cases.test_draft import DEMO_CORPUS, _draft, _rows, _sentences, fake_drafter
from tests.conftest import run_cli
from tests.graders.fake_anthropic import user_text
from tests.llm.backends import ANTHROPIC

ONLY_LOOKUPS = [f"drafter.kinds.{k}=0" for k in dc.KINDS if k != "lookup"]


def follow_drafter(body: dict) -> str:
    """The drafter of test_draft, and for a follow-up request: a first follow-up citing the
    last sentence shown (the linked document's), a second citing sentence 999."""
    prompt = user_text(body)
    if not prompt.startswith("Follow-ups."):
        return fake_drafter(body)
    last = _sentences(prompt)[-1]
    nugget = {"text": " ".join(last[3].split()[:6]), "vital": True}
    return json.dumps({"follow_ups": [
        {"question": "and can I change that?", "reference_answer": "Yes, see the document.",
         "evidence": [last[0]], "nuggets": [nugget]},
        {"question": "and what about the other one?", "reference_answer": "Also yes.",
         "evidence": [999], "nuggets": [nugget]}]})


def test_follow_ups_are_drafted_as_conversations_and_a_bad_quote_is_dropped(tmp_path):
    with ANTHROPIC.server(handler=follow_drafter) as srv:
        p = _draft(tmp_path, ANTHROPIC, srv, "n=2", "--follow-ups", "2", *ONLY_LOOKUPS,
                   "drafter.paraphrase_above=null")
        sent = ANTHROPIC.requests(srv)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.splitlines()[0].endswith(
        "; up to 2 more for 2 follow-up(s) each (at most 4096 more output tokens)")
    assert len(sent) == 4  # two drafts, then one follow-up request each
    assert "follow-ups: 2 draft(s) written as conversations with 2 follow-up turn(s)" \
        in p.stdout
    assert "dropped 2: follow-up evidence not placeable 2 (first: " in p.stdout
    assert "turn 3: sentence 999 was not shown" in p.stdout
    corpus = load_corpus(DEMO_CORPUS)
    convs = _rows(tmp_path / "drafts.jsonl")
    assert len(convs) == 2
    for conv in convs:
        assert conv["id"].startswith("drafted-") and conv["needs_review"] is True
        assert conv["tags"]["origin"] == "drafted" and "kind" not in conv["tags"]
        first, follow = conv["turns"]  # the turn citing sentence 999 was dropped
        assert "follow_up" not in first and first["tags"] == {"kind": "lookup"}
        assert first["reference_answer"]  # every turn but the last needs one
        assert follow["follow_up"] is True and follow["question"] == "and can I change that?"
        note = conv["draft"]
        assert note["kind"] == "lookup" and note["follow_ups"]["asked"] == 2
        assert note["follow_ups"]["written"] == 1
        shown = note["follow_ups"]["documents"]
        assert shown[0] == note["documents"][0] and len(shown) == 2  # and a linked one
        main, other = corpus[shown[0]], corpus[shown[1]]
        assert sum(main.metadata[k] != other.metadata.get(k) for k in main.metadata) <= 1
        for turn in conv["turns"]:
            case = Case.model_validate({"id": "x", "user": conv.get("user"),
                                        "filters": conv["filters"],
                                        **{k: v for k, v in turn.items() if k != "follow_up"}})
            assert case.evidence and any(n.vital for n in case.nuggets)
            for ev in case.evidence:  # verbatim: the quote is the document's text at its span
                assert corpus[ev.doc_id].text[ev.start:ev.end] == ev.quote
        assert follow["evidence"][0]["doc_id"] == shown[1]

    p = run_cli("cases", "draft", "--follow-ups", "0", "--dry-run", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip() == "raglab: error: --follow-ups=0: must be at least 1"


def test_a_follow_up_that_cannot_be_placed_drops_the_ones_after_it():
    doc = Document(doc_id="kb/a", text="## Fees\n\nThe fee is 2%. It is waived on Pro.")
    view = dc.shown([doc], 6000)
    draft = {"id": "drafted-x", "question": "what is the fee?", "filters": {},
             "reference_answer": "2%.", "tags": {"kind": "lookup"},
             "draft": {"kind": "lookup", "documents": ["kb/a"]}}
    asked = df.Asked(draft, view, None)  # type: ignore[arg-type]
    good = {"question": "and on Pro?", "reference_answer": "Waived.", "evidence": [2],
            "nuggets": [{"text": "waived on Pro", "vital": True}]}
    kept, drops = df.turns_of(asked, {"follow_ups": [{**good, "evidence": [7]}, good]}, 2,
                              85.0)
    assert kept == [] and [r for r, _ in drops] == ["follow-up evidence not placeable",
                                                     "follow-up after a dropped one"]
    kept, drops = df.turns_of(asked, {"follow_ups": [good, {**good, "nuggets": []}]}, 2, 85.0)
    assert drops == [("follow-up without a vital nugget", "kb/a turn 3: 'and on Pro?'")]
    assert [t["evidence"][0]["quote"] for t in kept] == ["It is waived on Pro."]
    _, drops = df.turns_of(asked, {"follow_ups": [{**good, "reference_answer": " "}]}, 2, 85.0)
    assert [r for r, _ in drops] == ["follow-up without a reference answer"]
    # a linked document is one the draft's user may see, within one metadata key of it
    near = Document(doc_id="kb/b", text="B says so.", metadata={"region": "UK"})
    far = Document(doc_id="kb/c", text="C says so.", metadata={"region": "UK", "p": "x"})
    hidden = Document(doc_id="kb/d", text="D says so.", acl=["staff"])
    got = df.linked([doc, near, far, hidden], [doc], None, {}, random.Random(0))
    assert [d.doc_id for d in got] == ["kb/b"]
