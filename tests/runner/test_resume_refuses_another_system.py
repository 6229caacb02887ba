"""A resume whose system under test changed under the same config is refused (exit 2, one
line): a replay file rewritten at the same path, a python target's source edited. Records
of both systems would otherwise be mixed in one run. An unchanged system resumes."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import REPO, TINY_CASES, TINY_CORPUS, run_cli, write_jsonl

SYSTEM = '''
def make(options):
    class Echo:
        def answer(self, request):
            return {"case_id": request.case_id, "answer": "VERSION"}
    return Echo()
'''


def _common(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    return [f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null",
            "tracking=none", "grader=none", "progress=off", "k=3", "candidate_depth=5",
            "metrics.cutoffs=[1,3,5]", f"cache_dir={tmp_path / 'c'}",
            f"hydra.run.dir={tmp_path / 'run'}"]


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
def test_a_replay_file_rewritten_at_the_same_path_is_not_resumed(tmp_path):
    replay = write_jsonl(tmp_path / "out.jsonl",
                         [{"case_id": c["id"], "answer": "first"} for c in TINY_CASES])
    args = ["run", "system=replay", f"system.path={replay}", *_common(tmp_path)]
    assert run_cli(*args, cwd=tmp_path).returncode == 0
    assert run_cli(*args, cwd=tmp_path).returncode == 0  # unchanged: nothing to do, fine
    identity = json.loads((tmp_path / "run" / "run.json").read_text())["system"]
    assert len(identity["replay_sha256"]) == 64
    write_jsonl(replay, [{"case_id": c["id"], "answer": "second"} for c in TINY_CASES])
    before = (tmp_path / "run" / "records.jsonl").read_bytes()
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "the system under test changed" in lines[0]
    assert "replay_sha256" in lines[0]
    assert (tmp_path / "run" / "records.jsonl").read_bytes() == before


def test_a_python_target_whose_source_changed_is_not_resumed(tmp_path):
    module = tmp_path / "echo_sys.py"
    module.write_text(SYSTEM.replace("VERSION", "one"), encoding="utf-8")
    args = ["run", "system=python", "system._target_=echo_sys.make", *_common(tmp_path)]
    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    assert run_cli(*args, cwd=tmp_path, env=env).returncode == 0
    module.write_text(SYSTEM.replace("VERSION", "two"), encoding="utf-8")
    proc = run_cli(*args, cwd=tmp_path, env=env)
    assert proc.returncode == 2 and "python_source_sha256" in proc.stderr
