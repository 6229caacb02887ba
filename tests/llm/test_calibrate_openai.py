"""``raglab calibrate grader=openai`` against the fake Chat Completions server: the judge is
calibrated like the Claude one (kappa per kind), under its own metric versions, and an
unchanged re-run makes no request."""

from __future__ import annotations

import json

import pytest

from tests.calibration.test_calibrate_claude import _labels
from tests.conftest import run_cli
from tests.graders.fake_anthropic import fake_model
from tests.llm.backends import OPENAI


@pytest.mark.slow  # end to end (CLI runs): in the slow suite
def test_calibrate_with_the_openai_judge(tmp_path):
    labels = _labels(tmp_path)
    cal = ["calibrate", "grader=openai", f"dataset.labels={labels}",
           f"cache_dir={tmp_path / 'cache'}", "tracking=none"]
    with OPENAI.server(handler=fake_model) as srv:
        env = OPENAI.env(srv)
        p = run_cli(*cal, f"hydra.run.dir={tmp_path / 'cal'}", cwd=tmp_path, env=env)
        assert p.returncode == 0, p.stderr[-3000:]
        doc = json.loads((tmp_path / "cal" / "calibration.json").read_text())
        sent = len(OPENAI.requests(srv))
        assert sent == doc["work"]["grader_calls"] > 0
        assert doc["grader"] == "openai"
        for sec in ("claims", "nuggets"):
            assert doc[sec]["kappa"] is not None and doc[sec]["ci_low"] <= doc[sec]["ci_high"]
        p = run_cli(*cal, f"hydra.run.dir={tmp_path / 'cal2'}", cwd=tmp_path, env=env)
        assert p.returncode == 0, p.stderr[-3000:]
        assert len(OPENAI.requests(srv)) == sent
    assert OPENAI.key.encode() not in (tmp_path / "cal" / "calibration.json").read_bytes()
