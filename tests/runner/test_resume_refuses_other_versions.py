"""Resuming a run refuses records scored under other metric versions: a changed grader
prompt, or metric code other than the run was started under."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from raglab.data.dataset import resolve_path
from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl
from tests.graders.fake_anthropic import TEST_KEY, FakeAnthropic, fake_model
from tests.graders.test_run_claude import _env


def _tiny(tmp: Path) -> list[str]:
    c = write_jsonl(tmp / "corpus.jsonl", TINY_CORPUS)
    k = write_jsonl(tmp / "cases.jsonl", TINY_CASES)
    return [f"dataset.corpus={c}", f"dataset.cases={k}", "dataset.labels=null"]


def _claude_run(tmp: Path, run_dir: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "raglab.cli", "run", *_tiny(tmp), "tracking=none",
           "progress=off", f"hydra.run.dir={run_dir}", f"cache_dir={tmp / 'cache'}", *extra]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp)


# -- resume checks every family's metric version ------------------------------------------

@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
def test_resume_after_a_grader_prompt_changed_is_refused(tmp_path):
    prompts = tmp_path / "prompts"
    shutil.copytree(resolve_path("pkg://raglab/graders/prompts"), prompts)
    out = tmp_path / "r"
    with FakeAnthropic(handler=fake_model) as srv:
        env = _env(srv.url, TEST_KEY)
        p = _claude_run(tmp_path, out, env, "grader=claude", f"grader.prompts={prompts}")
        assert p.returncode == 0, p.stderr[-3000:]
        first = json.loads((out / "metrics.json").read_text())
        # an interrupted run: the last two records are lost
        recs = (out / "records.jsonl").read_text().splitlines()
        (out / "records.jsonl").write_text("\n".join(recs[:2]) + "\n")
        before = (out / "records.jsonl").read_bytes()
        # one word of the verify prompt changes; the configuration text does not
        v = prompts / "verify.txt"
        v.write_text(v.read_text().replace("strict, careful", "strict"))
        n_calls = len(srv.calls())
        p = _claude_run(tmp_path, out, env, "grader=claude", f"grader.prompts={prompts}")
    assert p.returncode == 3, (p.returncode, p.stderr[-2000:])
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    old = first["metric_versions"]["faithfulness"]
    assert "faithfulness" in lines[0] and old in lines[0]
    assert (out / "records.jsonl").read_bytes() == before  # nothing appended
    assert len(srv.calls()) == n_calls  # no work done
    ident = json.loads((out / "run.json").read_text())  # what the run was started with
    assert ident["metric_versions"] == first["metric_versions"]


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
def test_resume_of_a_run_started_under_other_metric_code_is_refused(tmp_path):
    out = tmp_path / "r"
    args = ["run", *_tiny(tmp_path), "tracking=none", "progress=off", f"hydra.run.dir={out}",
            f"cache_dir={tmp_path / 'c'}"]
    assert run_cli(*args, cwd=tmp_path).returncode == 0
    ident = json.loads((out / "run.json").read_text())
    current = ident["metric_versions"]["retrieval"]
    ident["metric_versions"]["retrieval"] = "0ld0ld0ld0ld"
    (out / "run.json").write_text(json.dumps(ident))
    before = (out / "records.jsonl").read_bytes()
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 3
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "retrieval" in lines[0] and "0ld0ld0ld0ld" in lines[0] and current in lines[0]
    assert (out / "records.jsonl").read_bytes() == before
    # the same versions resume fine
    ident["metric_versions"]["retrieval"] = current
    (out / "run.json").write_text(json.dumps(ident))
    assert run_cli(*args, cwd=tmp_path).returncode == 0
