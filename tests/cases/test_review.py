"""``raglab cases review``: a person accepts, edits (re-checked on save), rejects and leaves
drafts for later; every decision is saved at once, a second session goes on where the first
stopped, and the accepted drafts are added to the set and validate cleanly. The terminal
session runs the real program under tmux (keys sent, screen read back)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import REPO, TINY_CASES, TINY_CORPUS, run_cli, write_jsonl


def _rows(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _drafts(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    note = {"from": "corpus", "corpus": str(corpus), "model": "fake"}

    def draft(i, kind, question, quote, doc="kb/a", **extra):
        text = next(d["text"] for d in TINY_CORPUS if d["doc_id"] == doc)
        start = text.index(quote)
        return {"id": f"drafted-{i}", "question": question, "reference_answer": "An answer.",
                "evidence": [{"doc_id": doc, "quote": quote, "start": start,
                              "end": start + len(quote), "grade": 1}],
                "nuggets": [{"text": "the fact", "vital": True}], "answerable": True,
                "tags": {"origin": "drafted", "kind": kind}, "must_not_contain": [],
                "needs_review": True, "draft": {**note, "kind": kind, "documents": [doc, "kb/b"]},
                **extra}

    drafts = write_jsonl(tmp_path / "drafts.jsonl", [
        draft(1, "lookup", "is there a fee on refunds for pro?",
              "The refund fee is waived for Pro plans.",
              must_not_contain=[{"text": "02:00 UTC", "kind": "distractor"}]),
        draft(2, "lookup", "can i get part of my money back",
              "Partial refunds are allowed."),
        draft(3, "lookup", "exports when", "Exports run nightly at 02:00 UTC.", doc="kb/b"),
        draft(4, "lookup", "csv or pdf?", "You can download CSV or PDF exports", doc="kb/b"),
    ])
    return corpus, cases, drafts


EDITOR = """import json, pathlib, sys
path = pathlib.Path(sys.argv[1])
count = pathlib.Path(sys.argv[0]).with_suffix(".count")
n = int(count.read_text()) if count.exists() else 0
count.write_text(str(n + 1))
case = json.loads(path.read_text())
if n == 0:   # first save: a quote that is not in the document
    case["evidence"][0]["quote"] = "Partial refunds are never allowed."
else:        # then a good edit: a new question, the quote trimmed (offsets found again)
    case["question"] = "EDITED can i get some of my money back?"
    case["evidence"][0]["quote"] = "Partial refunds are allowed"
path.write_text(json.dumps(case))
"""


def test_review_decisions_are_saved_and_a_second_session_goes_on(tmp_path):
    """Keys read from a pipe (no terminal): the same program, the same files."""
    corpus, cases, drafts = _drafts(tmp_path)
    p = run_cli("cases", "review", str(drafts), cwd=tmp_path,
                input_text="a\nr\nwrong product\nl\n")  # the input ends: a quit
    assert p.returncode == 0, p.stderr
    assert ">>>The refund fee is waived for Pro plans.<<<" in p.stdout
    # the forbidden value shown where it comes from, in the other document
    assert "must not contain '02:00 UTC', from the other document:" in p.stdout
    assert "in kb/b (Exports)" in p.stdout and ">>>02:00 UTC<<<" in p.stdout
    assert "1 accepted, 1 rejected, 1 later, 1 not yet seen" in p.stdout
    rows = {d["id"]: d for d in _rows(drafts)}
    assert "needs_review" not in rows["drafted-1"]
    assert rows["drafted-2"]["draft"]["review"]["reason"] == "wrong product"
    assert rows["drafted-2"]["needs_review"] is True
    assert [d["id"] for d in _rows(tmp_path / "drafts.accepted.jsonl")] == ["drafted-1"]
    # the next session: first the unseen draft, then the one left for later
    p = run_cli("cases", "review", str(drafts), cwd=tmp_path, input_text="a\na\n")
    assert p.returncode == 0, p.stderr
    assert "draft 1 of 2 this session: drafted-4" in p.stdout
    assert "draft 2 of 2 this session: drafted-3" in p.stdout
    assert [d["id"] for d in _rows(tmp_path / "drafts.accepted.jsonl")] == [
        "drafted-1", "drafted-3", "drafted-4"]
    p = run_cli("cases", "review", str(drafts), cwd=tmp_path, input_text="")
    assert p.returncode == 0 and "every draft is decided" in p.stdout
    data = [f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null"]
    p = run_cli("cases", "add", str(drafts), *data, cwd=tmp_path)
    assert p.returncode == 2 and "drafted-2" in p.stderr and "needs_review" in p.stderr


def test_review_of_a_missing_or_broken_file_is_one_line(tmp_path):
    p = run_cli("cases", "review", str(tmp_path / "none.jsonl"), cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "no such drafts file" in p.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "question": "q"}\n{oops\n')
    p = run_cli("cases", "review", str(bad), "--corpus", str(tmp_path / "c.jsonl"),
                cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "bad.jsonl" in p.stderr
    assert "Traceback" not in p.stderr


# -- a person at a terminal (tmux) ---------------------------------------------------------

class Tmux:
    """One tmux server of our own (its own socket), killed at the end."""

    def __init__(self, tmp_path):
        self.sock = f"raglab-review-{uuid.uuid4().hex[:8]}"
        self.tmp = tmp_path
        self.socket = ""

    def __call__(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.sock, *args], check=True,
                              capture_output=True, text=True).stdout

    def start(self, command: str, env: dict[str, str]) -> None:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        self("new-session", "-d", "-s", "r", "-x", "110", "-y", "50",
             f"cd {shlex.quote(str(self.tmp))} && env {exports} {command}; "
             "echo REVIEW-EXIT=$?; sleep 120")
        self.socket = self("display-message", "-p", "#{socket_path}").strip()

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "r", "-S", "-200")

    def wait(self, text: str, timeout: float = 60) -> str:
        """The screen (its lines joined, as wrapped text reads) once ``text`` is on it."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            screen = " ".join(self.screen().split())
            if text in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never appeared:\n{self.screen()}")

    def keys(self, *keys: str) -> None:
        self("send-keys", "-t", "r", *keys)

    def stop(self) -> None:
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True)
        if self.socket:  # the server's socket file, left behind by kill-server
            with contextlib.suppress(OSError):
                os.unlink(self.socket)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_a_review_session_at_the_terminal(tmp_path):
    corpus, cases, drafts = _drafts(tmp_path)
    editor = tmp_path / "editor.py"
    editor.write_text(EDITOR)
    env = {"PYTHONPATH": str(REPO), "EDITOR": f"{sys.executable} {editor}",
           "PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "TERM": "xterm"}
    review = f"{shlex.quote(sys.executable)} -m raglab.cli cases review drafts.jsonl"
    tmux = Tmux(tmp_path)
    try:
        tmux.start(review, env)
        screen = tmux.wait("draft 1 of 4 this session: drafted-1")
        assert "The refund fee is waived for Pro plans." in screen
        assert ">>>" in screen and "in kb/a (Refunds)" in screen
        tmux.keys("a")  # one key, no Enter
        tmux.wait("draft 2 of 4 this session: drafted-2")
        assert "needs_review" not in _rows(drafts)[0]  # saved at once
        tmux.keys("e")  # the editor's first save breaks the quote: refused, offered again
        tmux.wait("not saved: evidence 0: quote not found in document 'kb/a'")
        assert _rows(drafts)[1]["question"] == "can i get part of my money back"
        tmux.keys("e")
        screen = tmux.wait("EDITED can i get some of my money back?")
        assert "(edited)" in screen and ">>>Partial refunds are allowed<<<" in screen
        edited = _rows(drafts)[1]
        assert edited["evidence"][0]["quote"] == "Partial refunds are allowed"
        text = TINY_CORPUS[0]["text"]
        assert text[edited["evidence"][0]["start"]:edited["evidence"][0]["end"]] == \
            "Partial refunds are allowed"
        tmux.keys("a")
        tmux.wait("draft 3 of 4 this session: drafted-3")
        tmux.keys("r")
        tmux.wait("reason:")
        tmux.keys("duplicate of t-2", "Enter")
        tmux.wait("draft 4 of 4 this session: drafted-4")
        tmux.keys("q")
        screen = tmux.wait("REVIEW-EXIT=0")
        assert "2 accepted, 1 rejected, 0 later, 1 not yet seen" in screen
        tmux.stop()
        # the next session goes on with the draft not yet seen
        tmux.start(review, env)
        tmux.wait("draft 1 of 1 this session: drafted-4")
        tmux.keys("l")
        tmux.wait("REVIEW-EXIT=0")
        tmux.stop()
        tmux.start(review, env)
        tmux.wait("draft 1 of 1 this session: drafted-4")
        tmux.keys("a")
        screen = tmux.wait("REVIEW-EXIT=0")
        assert "3 accepted, 1 rejected, 0 later, 0 not yet seen" in screen
    finally:
        tmux.stop()
    rows = {d["id"]: d for d in _rows(drafts)}
    assert rows["drafted-3"]["draft"]["review"]["reason"] == "duplicate of t-2"
    accepted = tmp_path / "drafts.accepted.jsonl"
    # the edited draft has the id of its new labels, and its old one as lineage
    edited = _rows(drafts)[1]
    assert edited["id"].startswith("drafted-") and edited["id"] != "drafted-2"
    assert edited["draft"]["review"]["edited_from"] == ["drafted-2"]
    assert [d["id"] for d in _rows(accepted)] == ["drafted-1", edited["id"], "drafted-4"]
    data = [f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null"]
    p = run_cli("cases", "add", str(accepted), *data, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "added 3 case(s)" in p.stdout
    p = run_cli("validate", *data, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "quarantine.jsonl").read_text().strip() == ""
