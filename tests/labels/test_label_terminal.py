"""``raglab label RUN --review`` at a real terminal (tmux): label, skip, back, quit, resume,
Ctrl-C; every key saved at once, nothing lost, one session at a time. (A file with every
row labelled: ``nothing to label``, tests/labels/test_label_cli.py.)"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys

import pytest

from tests.cases.test_review import Tmux
from tests.conftest import REPO, run_cli


def _rows(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_label_quit_resume_and_interrupt_lose_nothing(runs, tmp_path):
    a, _ = runs
    p = run_cli("label", str(a), "--n", "4", "--metrics", "correctness", "--seed", "5",
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    todo = a / "labels" / "to-label.jsonl"
    ids = [r["case_id"] for r in _rows(todo)]
    assert len(ids) == 4
    env = {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", ""),
           "HOME": str(tmp_path), "TERM": "xterm"}
    review = f"{shlex.quote(sys.executable)} -m raglab.cli label {shlex.quote(str(a))} --review"
    tmux = Tmux(tmp_path)
    try:
        tmux.start(review, env)
        screen = tmux.wait(f"row 1 of 4 this session: case {ids[0]} metric correctness")
        assert "Does the answer state what the reference answer says?" in screen
        assert "reference:" in screen and "answer:" in screen
        tmux.keys("y")  # one key, no Enter
        tmux.wait(f"row 2 of 4 this session: case {ids[1]}")
        tmux.keys("p")
        tmux.wait(f"row 3 of 4 this session: case {ids[2]}")
        tmux.keys("s")  # skipped: asked again after the rows not yet seen
        tmux.wait(f"row 4 of 4 this session: case {ids[3]}")
        tmux.keys("b")  # back to the skipped row
        tmux.wait(f"row 3 of 4 this session: case {ids[2]}")
        # a second session of the same file is refused while this one runs
        second = run_cli("label", str(a), "--review", cwd=tmp_path)
        assert second.returncode == 2
        assert "another review session holds this labelling file" in second.stderr
        tmux.keys("q")
        screen = tmux.wait("REVIEW-EXIT=0")
        assert "2 of 4 rows labelled (1 skipped)" in screen
        tmux.stop()
        assert [r["label"] for r in _rows(todo)] == ["yes", "partial", None, None]
        stored = _rows(a / "labels" / "labels.jsonl")
        assert {(r["case_id"], r["label"]) for r in stored} == {(ids[0], 1.0), (ids[1], 0.5)}

        tmux.start(review, env)  # resumes: the unseen row first, then the skipped one
        tmux.wait(f"row 1 of 2 this session: case {ids[3]}")
        tmux.keys("n")
        tmux.wait(f"row 2 of 2 this session: case {ids[2]}")
        tmux.keys("C-c")
        screen = tmux.wait("REVIEW-EXIT=0")
        assert "stopped; every label so far is saved" in screen
        tmux.stop()
        assert [r["label"] for r in _rows(todo)] == ["yes", "partial", None, "no"]
    finally:
        tmux.stop()
    assert {r["case_id"]: r["label"] for r in _rows(a / "labels" / "labels.jsonl")} == {
        ids[0]: 1.0, ids[1]: 0.5, ids[3]: 0.0}
    # the session's end put the estimates' section in metrics.json (too few labels yet)
    entry = json.loads((a / "metrics.json").read_text())["ppi"]["metrics"]["correctness"]
    assert entry["overall"] is None and entry["labels"]["usable"] == 3
