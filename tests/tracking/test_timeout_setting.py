"""Issue 24, first hour item 7: ``tracking.timeout_s=5``, as docs/reliability.md writes it,
is a setting of the composed config (it was refused as an unknown key; only
``+tracking.timeout_s=5`` worked)."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli


@pytest.mark.parametrize("tracking", ["mlflow", "none"])
def test_the_documented_timeout_override_is_accepted(tiny, tmp_path, tracking):
    corpus, cases = tiny
    out = tmp_path / "run"
    proc = run_cli("run", f"tracking={tracking}", "tracking.timeout_s=5",
                   f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "grader=none",
                   f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null",
                   "metrics.cutoffs=[1,3,5]", "k=3", "candidate_depth=5",
                   f"hydra.run.dir={out}", f"cache_dir={tmp_path / 'cache'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "timeout_s: 5" in (out / "config.yaml").read_text()


def test_a_bad_timeout_is_one_line(tmp_path):
    proc = run_cli("run", "tracking.timeout_s=0", f"hydra.run.dir={tmp_path / 'run'}",
                   cwd=tmp_path)
    assert proc.returncode == 2
    assert "tracking.timeout_s" in proc.stderr and "Traceback" not in proc.stderr
