"""The demo's conversations (raglab/datasets/demo/conversations.jsonl) hold what they are
for: 2-5 turns, follow-ups that need the history (no filter narrows them to their
document), topic shifts, permission traps and changes, retention nuggets, and evidence
copied verbatim from the corpus."""

from __future__ import annotations

import json
import re
from collections import Counter

from raglab.data.dataset import load_corpus, resolve_path
from raglab.data.schema import User, may_see

CONVS = resolve_path("pkg://raglab/datasets/demo/conversations.jsonl")
CORPUS = resolve_path("pkg://raglab/datasets/demo/corpus.jsonl")


def test_the_demo_conversations_hold_every_pattern_with_verbatim_evidence():
    corpus = load_corpus(CORPUS)
    convs = [json.loads(x) for x in CONVS.read_text(encoding="utf-8").splitlines()]
    lengths = Counter(len(c["turns"]) for c in convs)
    assert len(convs) >= 44 and set(lengths) <= {2, 3, 4, 5}
    assert len({c["id"] for c in convs}) == len(convs)
    n: Counter = Counter()
    for c in convs:
        assert re.fullmatch(r"conv-\d{4}", c["id"]) and {"intent", "product"} <= set(c["tags"])
        user, filters = c.get("user"), c.get("filters") or {}
        trap = changed = False
        for k, t in enumerate(c["turns"], 1):
            before = user
            user = t.get("user", user)
            filters = t.get("filters", filters)
            who = User.model_validate(user) if user else None
            assert "difficulty" in t["tags"]
            if k < len(c["turns"]):
                assert t["reference_answer"]
            for ev in t["evidence"]:
                assert ev["quote"] in corpus[ev["doc_id"]].text, (c["id"], k, ev["quote"])
            if t.get("follow_up"):
                n["follow_up"] += 1
                assert set(filters) <= {"region"}, (c["id"], k)
            n["topic_shift"] += bool(t.get("topic_shift"))
            hidden = [ev for ev in t["evidence"] if not may_see(corpus[ev["doc_id"]].acl, who)]
            if not t["answerable"]:
                assert not t["nuggets"]
                if hidden:
                    trap = True
                else:
                    n["unanswerable"] += 1
                    assert not t["evidence"]
            else:
                assert not hidden and any(x["vital"] for x in t["nuggets"])
            if k > 1 and user != before and t["answerable"]:
                changed = True
            retained = [x for x in t["nuggets"] if "from_turn" in x]
            assert all(1 <= x["from_turn"] < k for x in retained)
            n["retention"] += len(retained)
        n["trap"] += trap
        n["change"] += changed
    assert n["follow_up"] >= 60 and n["topic_shift"] >= 12 and n["retention"] >= 10
    assert n["trap"] >= 6 and n["change"] >= 3 and n["unanswerable"] >= 2
