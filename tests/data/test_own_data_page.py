"""docs/own-data.md run as written, in a fresh folder: init, validate, run, sweep, and the
local judge (against a fake OpenAI-compatible server at the page's address's place)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import REPO

PAGE = REPO / "docs" / "own-data.md"
_BLOCK = re.compile(r"^```bash\n(?P<body>.*?)^```$", re.S | re.M)


def _commands() -> list[list[str]]:
    return [shlex.split(line) for m in _BLOCK.finditer(PAGE.read_text())
            for line in m.group("body").splitlines() if line.strip()]


def _raglab(args: list[str], cwd, env=None) -> subprocess.CompletedProcess:
    assert args[0] == "raglab"
    full = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "raglab.cli", *args[1:]], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_the_own_data_page_runs_as_written(tmp_path):
    from raglab.data.dataset import resolve_path
    from tests.graders.fake_anthropic import fake_model
    from tests.llm.fake_openai import FakeOpenAI

    demo = "pkg://raglab/datasets/demo/"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "corpus.jsonl").write_bytes(
        resolve_path(demo + "corpus.jsonl").read_bytes())
    cases = resolve_path(demo + "cases.jsonl").read_text().splitlines()[:12]
    (tmp_path / "data" / "faq.jsonl").write_text("\n".join(cases) + "\n")
    commands = _commands()
    assert [c[1] for c in commands] == ["init", "validate", "run", "run", "run"]
    for cmd in commands[:4]:
        proc = _raglab(cmd, tmp_path)
        assert proc.returncode == 0, (cmd, proc.stderr[-2000:])
    assert (tmp_path / "conf" / "dataset" / "faq.yaml").is_file()
    run = json.loads((tmp_path / "runs" / "faq" / "metrics.json").read_text())
    assert run["dataset"]["name"] == "faq" and run["n_cases"] == 12
    jobs = sorted(p for p in (tmp_path / "multirun" / "faq").iterdir() if p.name.isdigit())
    assert len(jobs) == 4
    names = [(j / "report.md").read_text().splitlines()[0] for j in jobs]
    assert names == [f"# raglab run report: size={s} k={k}" for s in (128, 256) for k in (3, 5)]
    judge = commands[4]
    url = next(a for a in judge if a.startswith("llm.base_url=")).split("=", 1)[1]
    with FakeOpenAI(handler=fake_model) as srv:
        judge = [a.replace(url, srv.base_url) for a in judge]
        proc = _raglab(judge, tmp_path, {"NO_PROXY": "127.0.0.1,localhost"})
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert srv.calls("/v1/chat/completions")
    assert sum("no price known for model 'qwen2.5-7b-instruct'" in x
               for x in proc.stderr.splitlines()) == 1
    judged = json.loads((tmp_path / "runs" / "judged" / "metrics.json").read_text())
    assert judged["dataset"]["name"] == "faq"
    assert (judged.get("model_usage") or {}).get("cost_usd") is None
