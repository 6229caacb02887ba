"""``raglab cases review`` loses nothing: an accepted file that is one of the dataset's own
files is refused (it used to be emptied when the session started), nothing is written before
a decision, a second session on one drafts file is refused with one line naming the first
(two real sessions, each on its own pseudo-terminal), a session killed with SIGKILL leaves a
lock the next one takes over, terminal escapes in drafts and documents are shown escaped,
and an edited drafted case gets a new id with its old one recorded."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

from raglab.cases.draft import draft_id
from tests.cases.test_review import _drafts, _rows
from tests.conftest import REPO, TINY_CASES, TINY_CORPUS, run_cli, write_jsonl


def _one_line(p) -> str:
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    return p.stderr


def test_accepted_file_that_is_the_dataset_cases_is_refused_and_kept(tmp_path):
    corpus, cases, drafts = _drafts(tmp_path)
    before = cases.read_bytes()
    # old drafts name only their corpus: the cases file is known by what it holds
    err = _one_line(run_cli("cases", "review", str(drafts), "--accepted", str(cases),
                            cwd=tmp_path, input_text="q\n"))
    assert "holds a case that is not a draft of" in err and "id t-1" in err
    assert cases.read_bytes() == before
    err = _one_line(run_cli("cases", "review", str(drafts), "--accepted", str(corpus),
                            cwd=tmp_path, input_text="q\n"))
    assert "is an input of this command (the corpus" in err
    # drafts that name the dataset's cases file (as cases draft now writes them)
    rows = _rows(drafts)
    for d in rows:
        d["draft"]["cases"] = str(cases)
    write_jsonl(drafts, rows)
    link = tmp_path / "link.jsonl"
    link.symlink_to(cases)
    err = _one_line(run_cli("cases", "review", str(drafts), "--accepted", str(link),
                            cwd=tmp_path, input_text="a\n"))
    assert "is an input of this command (the dataset's cases" in err
    assert cases.read_bytes() == before
    assert all("review" not in d["draft"] for d in _rows(drafts))  # no decision taken


def test_nothing_is_written_before_the_first_decision(tmp_path):
    _, _, drafts = _drafts(tmp_path)
    before = drafts.read_bytes()
    p = run_cli("cases", "review", str(drafts), cwd=tmp_path, input_text="q\n")
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "drafts.accepted.jsonl").exists()
    assert drafts.read_bytes() == before
    p = run_cli("cases", "review", str(drafts), cwd=tmp_path, input_text="a\nq\n")
    assert p.returncode == 0, p.stderr
    assert [d["id"] for d in _rows(tmp_path / "drafts.accepted.jsonl")] == ["drafted-1"]
    # a later session with its accepted file: its own drafts are fine
    p = run_cli("cases", "review", str(drafts), cwd=tmp_path, input_text="a\nq\n")
    assert p.returncode == 0, p.stderr
    assert [d["id"] for d in _rows(tmp_path / "drafts.accepted.jsonl")] == [
        "drafted-1", "drafted-2"]


class Session:
    """``raglab cases review`` on a pseudo-terminal of its own (a person at a terminal)."""

    def __init__(self, tmp_path, *args: str):
        master, slave = os.openpty()
        env = {**os.environ, "PYTHONPATH": str(REPO), "TERM": "dumb"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "raglab.cli", "cases", "review", *args], cwd=tmp_path,
            stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
        os.close(slave)
        self.fd, self.seen, self.sent = master, b"", 0

    def wait_for(self, text: str, timeout: float = 60) -> str:
        end = time.monotonic() + timeout
        while text.encode() not in self.seen:
            if time.monotonic() > end:
                raise AssertionError(f"{text!r} never appeared:\n{self.seen.decode()}")
            self._read()
            if self.proc.poll() is not None:
                self._read()
                assert text.encode() in self.seen, f"{text!r}: ended:\n{self.seen.decode()}"
        return self.seen.decode()

    def keys(self, keys: str) -> None:
        """A key at the prompt (a key typed before it, while the terminal still reads
        lines, would wait for an Enter)."""
        end = time.monotonic() + 60
        while self.seen.count(b"[q]uit > ") <= self.sent:  # the next prompt
            assert time.monotonic() < end, self.seen.decode()
            self._read()
        time.sleep(0.5)  # the prompt is printed just before the terminal reads keys
        os.write(self.fd, keys.encode())
        self.sent += 1

    def _read(self) -> None:
        ready, _, _ = select.select([self.fd], [], [], 0.2)
        if ready:
            try:
                self.seen += os.read(self.fd, 65536)
            except OSError:
                pass

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        os.close(self.fd)


def test_a_second_session_is_refused_and_a_killed_ones_lock_is_taken_over(tmp_path):
    _, _, drafts = _drafts(tmp_path)
    first = Session(tmp_path, str(drafts))
    try:
        first.wait_for("draft 1 of 4 this session: drafted-1")
        first.keys("a")
        first.wait_for("draft 2 of 4 this session: drafted-2")
        second = Session(tmp_path, str(drafts))
        try:
            out = second.wait_for("finish it first")
            assert second.proc.wait(30) == 2
        finally:
            second.close()
        line = [x for x in out.splitlines() if "another review session" in x]
        assert len(line) == 1 and "Traceback" not in out
        assert f"(pid {first.proc.pid} on {socket.gethostname()})" in line[0]
        first.keys("a")  # the first session goes on undisturbed
        first.wait_for("draft 3 of 4 this session: drafted-3")
        os.kill(first.proc.pid, signal.SIGKILL)  # a stale lock: its pid is dead
        first.proc.wait(30)
    finally:
        first.close()
    third = Session(tmp_path, str(drafts))
    try:
        third.wait_for("draft 1 of 2 this session: drafted-3")
        third.keys("a")
        third.wait_for("draft 2 of 2 this session: drafted-4")
        third.keys("q")
        third.wait_for("3 accepted, 0 rejected, 0 later, 1 not yet seen")
        assert third.proc.wait(30) == 0
    finally:
        third.close()
    assert [d["id"] for d in _rows(tmp_path / "drafts.accepted.jsonl")] == [
        "drafted-1", "drafted-2", "drafted-3"]
    assert not (tmp_path / ".drafts.jsonl.review.lock").exists()


def test_escapes_in_drafts_and_documents_are_shown_escaped(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [
        {**TINY_CORPUS[0], "title": "Refunds\x1b]0;owned\x07",
         "text": TINY_CORPUS[0]["text"].replace("Partial", "\x1b[2JPartial")},
        *TINY_CORPUS[1:]])
    write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    quote = "The refund fee is waived for Pro plans."
    text = json.loads(corpus.read_text().splitlines()[0])["text"]
    draft = {"id": "drafted-\x1b[31mx", "question": "fee\x1b[8m hidden?\u202e",
             "reference_answer": "An \x1b[5manswer", "answerable": True,
             "evidence": [{"doc_id": "kb/a", "quote": quote, "start": text.index(quote),
                           "end": text.index(quote) + len(quote)}],
             "nuggets": [{"text": "the \x07fact", "vital": True}],
             "must_not_contain": [{"text": "x\x1b[0m", "kind": "secret"}],
             "tags": {"kind": "lookup"}, "needs_review": True,
             "draft": {"from": "corpus", "kind": "lookup\x1b[1m", "corpus": str(corpus),
                       "documents": ["kb/a"]}}
    drafts = write_jsonl(tmp_path / "drafts.jsonl", [draft])
    p = run_cli("cases", "review", str(drafts), cwd=tmp_path, input_text="q\n")
    assert p.returncode == 0, p.stderr
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in p.stdout
    for shown in ("drafted-\\x1b[31mx", "fee\\x1b[8m hidden?\\u202e", "An \\x1b[5manswer",
                  "the \\x07fact", "Refunds\\x1b]0;owned\\x07", "\\x1b[2JPartial",
                  "lookup\\x1b[1m"):
        assert shown in p.stdout, shown


EDIT = """import json, pathlib, sys
path = pathlib.Path(sys.argv[1])
case = json.loads(path.read_text())
case["question"] = "EDITED " + case["question"]
path.write_text(json.dumps(case))
"""


def test_an_edited_draft_gets_a_new_id_and_keeps_its_lineage(tmp_path):
    corpus, cases, drafts = _drafts(tmp_path)
    rows = _rows(drafts)
    rows[0]["id"] = draft_id(rows[0], 3)
    rows[0]["draft"]["seed"] = 3
    old = rows[0]["id"]
    write_jsonl(drafts, rows)
    editor = tmp_path / "edit.py"
    editor.write_text(EDIT)
    p = run_cli("cases", "review", str(drafts), cwd=tmp_path, input_text="e\na\nq\n",
                env={"EDITOR": f"{sys.executable} {editor}", "VISUAL": ""})
    assert p.returncode == 0, p.stderr
    edited = _rows(drafts)[0]
    assert edited["question"].startswith("EDITED ")
    assert edited["id"] != old and edited["id"] == draft_id(edited, 3)
    assert edited["draft"]["review"]["edited_from"] == [old]
    assert [d["id"] for d in _rows(tmp_path / "drafts.accepted.jsonl")] == [edited["id"]]
    # the next session accepts its accepted file (the old id is a draft of this file)
    p = run_cli("cases", "review", str(drafts), cwd=tmp_path, input_text="q\n")
    assert p.returncode == 0, p.stderr
