"""Real runs for the label tests: one run of the reference system on the demo's first 40
cases (no tracking), made once per test session, copied for each test."""

from __future__ import annotations

import shutil

import pytest

from raglab.data.dataset import resolve_path
from tests.conftest import run_cli


@pytest.fixture(scope="session")
def base_run(tmp_path_factory):
    """One run of the reference system on the demo's first 40 cases, made once."""
    tmp = tmp_path_factory.mktemp("labelruns")
    cases = resolve_path("pkg://raglab/datasets/demo/cases.jsonl").read_text().splitlines()[:40]
    (tmp / "cases40.jsonl").write_text("\n".join(cases) + "\n")
    p = run_cli("run", f"dataset.cases={tmp / 'cases40.jsonl'}", "dataset.labels=null",
                "tracking=none", f"hydra.run.dir={tmp / 'base'}", cwd=tmp)
    assert p.returncode == 0, p.stderr
    return tmp / "base"


@pytest.fixture
def runs(base_run, tmp_path):
    """Two copies of the run (the same cases, as two configurations of one set have)."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(base_run, a)
    shutil.copytree(base_run, b)
    return a, b


