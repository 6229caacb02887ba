"""Known answers for the judge-is-the-generator check: a run is self-graded when the
grader's model is the generator's (the same model id, whatever the backend) or a model the
system reports in its outputs; a grader that calls no model never is. metrics.json records
``self_graded``, the run report shows it, MLflow is tagged."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from raglab.commands.compose import compose_config
from raglab.config import parse_run_config
from raglab.data.schema import SystemOutput
from raglab.runner.run import Run
from tests.conftest import TINY_CASES, run_cli, write_jsonl
from tests.runner.test_resume_refuses_other_versions import _tiny

JUDGE = "claude-sonnet-4-6"  # conf/grader/claude.yaml's model


def _run(*overrides: str) -> Run:
    cfg = parse_run_config(compose_config(list(overrides)))
    return Run(cfg, Path(tempfile.mkdtemp()), "")


@pytest.mark.parametrize("overrides, reported, expected", [
    (("grader=claude", "generator=anthropic"), (), True),           # same model string
    (("grader=claude", "generator=anthropic", "generator.model=other"), (), False),
    (("grader=claude", "generator=anthropic", "grader.model=other"), (), False),
    (("grader=heuristic", "generator=anthropic"), (), False),      # no model: never
    (("grader=none", "generator=anthropic"), (), False),
    (("grader=claude",), (), False),                                # extractive generator
    (("grader=claude", "system=replay", "system.path=x.jsonl"), (JUDGE,), True),
    (("grader=claude", "system=replay", "system.path=x.jsonl"), ("gpt-4o",), False),
    (("grader=heuristic", "system=replay", "system.path=x.jsonl"), (JUDGE,), False),
    # either backend: the model string decides, not who serves it
    (("grader=openai", "generator=openai", "grader.model=m1", "generator.model=m1"), (), True),
    (("grader=openai", "generator=openai", "grader.model=m1"), (), False),
    (("grader=openai", "generator=anthropic", f"grader.model={JUDGE}"), (), True),
    (("grader=claude", "generator=openai", f"generator.model={JUDGE}"), (), True),
    (("grader=openai", "system=replay", "system.path=x.jsonl"), ("gpt-4.1",), True),
])
def test_self_graded_known_answers(overrides, reported, expected):
    assert _run(*overrides).self_graded(set(reported)) is expected


def test_system_output_model_is_optional_and_left_out_when_absent():
    plain = SystemOutput(case_id="a").model_dump()
    assert "model" not in plain  # old records keep their exact form
    assert SystemOutput.model_validate({"case_id": "a", "model": "m"}).model_dump()["model"] == "m"


def _replay(tmp: Path, model: str | None) -> Path:
    rows = []
    for c in TINY_CASES:
        row = {"case_id": c["id"], "candidates": [], "context": [],
               "answer": "Refunds are paid back within 5 business days."}
        if model is not None:
            row["model"] = model
        rows.append(row)
    return write_jsonl(tmp / "replay.jsonl", rows)


def test_heuristic_grader_is_never_self_graded(tmp_path):
    out = tmp_path / "r"
    p = run_cli("run", *_tiny(tmp_path), "system=replay",
                f"system.path={_replay(tmp_path, JUDGE)}", "tracking=none", "progress=off",
                f"hydra.run.dir={out}", f"cache_dir={tmp_path / 'c'}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert m["self_graded"] is False
    assert "self-graded" not in p.stderr
    assert "- self-graded: no" in (out / "report.md").read_text()
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert {r["output"]["model"] for r in recs} == {JUDGE}  # kept in the record


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_system_reporting_the_judges_model_is_self_graded(tmp_path):
    from tests.graders.fake_anthropic import TEST_KEY, FakeAnthropic, fake_model
    from tests.graders.test_run_claude import _env

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with FakeAnthropic(handler=fake_model) as srv:
        env = _env(srv.url, TEST_KEY)
        for name, model in (("same", JUDGE), ("other", "gpt-4o-mini")):
            cmd = [sys.executable, "-m", "raglab.cli", "run", *_tiny(tmp_path), "progress=off",
                   "grader=claude", "system=replay",
                   f"system.path={_replay(tmp_path, model)}", f"tracking.uri={uri}",
                   f"run_name={name}", f"hydra.run.dir={tmp_path / name}",
                   f"cache_dir={tmp_path / 'cache'}"]
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                               cwd=tmp_path)
            assert p.returncode == 0, p.stderr[-3000:]
            m = json.loads((tmp_path / name / "metrics.json").read_text())
            report = (tmp_path / name / "report.md").read_text()
            if name == "same":
                lines = [x for x in p.stderr.splitlines() if "self-graded" in x]
                assert len(lines) == 1 and JUDGE in lines[0]  # one console line
                assert m["self_graded"] is True
                assert any("self-graded" in w for w in m["warnings"])
                assert "- self-graded: yes" in report
            else:
                assert "self-graded" not in p.stderr
                assert m["self_graded"] is False and m["warnings"] == []
                assert "- self-graded: no" in report
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("raglab")
    tags = {r.data.tags["mlflow.runName"]: r.data.tags["raglab.self_graded"]
            for r in client.search_runs([exp.experiment_id])}
    assert tags == {"same": "true", "other": "false"}
