"""A judge is told a turn's question with the conversation so far; a single-turn case's
question reaches it unchanged (its prompts and metric versions are those of before)."""

from __future__ import annotations

import json
import subprocess
import sys

from raglab.data.conversation import asked
from raglab.data.dataset import load_dataset
from tests.conftest import write_jsonl
from tests.graders.fake_anthropic import fake_model
from tests.llm.backends import OPENAI
from tests.llm.fake_openai import CHAT, FakeOpenAI

SINGLE = {"id": "s-1", "question": "When do exports run?", "reference_answer": "Nightly.",
          "evidence": [{"doc_id": "kb/exports", "quote": "Exports run nightly at 02:00 UTC"}],
          "nuggets": [{"text": "nightly", "vital": True}]}


def test_asked_is_the_question_after_the_conversation_so_far(convs):
    ds = load_dataset(*convs)
    first, follow = ds.cases[3], ds.cases[4]  # conv-2.t1, conv-2.t2
    assert asked(first) == "When do exports run?"
    assert asked(follow) == ("(the conversation so far)\nUser: When do exports run?\n"
                             "Assistant: Nightly at 02:00 UTC.\n(the question now)\n"
                             "And for how long can I get them afterwards?")


def test_the_judge_sees_a_follow_ups_conversation(tmp_path, convs):
    corpus, cases = convs
    rows = [json.loads(x) for x in cases.read_text().splitlines()] + [SINGLE]
    write_jsonl(cases, rows)
    with FakeOpenAI(handler=fake_model) as srv:
        r = subprocess.run(
            [sys.executable, "-m", "raglab.cli", "run", "grader=openai", "tracking=none",
             f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null",
             f"hydra.run.dir={tmp_path / 'run'}", f"cache_dir={tmp_path / 'cache'}",
             "progress=off"], env=OPENAI.env(srv), capture_output=True, text=True,
            timeout=300, cwd=tmp_path)
        assert r.returncode in (0, 1), r.stderr
        sent = [json.dumps(c["body"]) for c in srv.calls(CHAT)]
    follow = [s for s in sent if "And for how long can I get them afterwards?" in s]
    assert follow and all("(the conversation so far)" in s and
                          "User: When do exports run?" in s for s in follow)
    # the single-turn case's question is sent as it is, with no conversation around it
    alone = [s for s in sent if "When do exports run?" in s and "afterwards" not in s]
    assert alone and not any("(the conversation so far)" in s for s in alone)
