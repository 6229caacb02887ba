"""Run names in MLflow, end to end (the real CLI, MLflow on sqlite): two sweeps over the same
axis with different fixed settings get different parent names, each saying what it swept
and what else it set; their jobs are named by the swept values; every name fits in 60
characters."""

from __future__ import annotations

import re

import pytest

from raglab.runner.naming import MAX_NAME
from tests.conftest import run_cli


@pytest.mark.slow  # two tracked sweeps end to end: in the slow suite
def test_two_sweeps_of_one_axis_with_other_settings_are_told_apart(tmp_path, tiny):
    """Before: both parents were named ``k sweep``."""
    corpus, cases = tiny
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    parents = {}
    for depth in ("5", "6"):
        proc = run_cli("run", "-m", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                       "dataset.labels=null", "grader=none", "k=1,2",
                       f"candidate_depth={depth}", f"tracking.uri={uri}", "progress=off",
                       f"hydra.sweep.dir={tmp_path / ('sweep' + depth)}",
                       f"cache_dir={tmp_path / 'c'}", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        parents[depth] = re.search(r"MLflow parent run ([0-9a-f]{32})", proc.stdout).group(1)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    names = {d: client.get_run(p).info.run_name for d, p in parents.items()}
    assert names["5"] != names["6"]
    for depth, name in names.items():
        assert name.startswith("sweep k=1,2 ") and f"candidate_depth={depth}" in name
        assert len(name) <= MAX_NAME
        exp_id = client.get_run(parents[depth]).info.experiment_id
        children = client.search_runs(
            [exp_id], f"tags.`mlflow.parentRunId` = '{parents[depth]}'")
        assert sorted(c.info.run_name for c in children) == ["k=1", "k=2"]


@pytest.mark.slow  # a tracked sweep end to end: in the slow suite
def test_the_jobs_of_a_sweep_over_concurrency_are_told_apart(tmp_path, tiny):
    """Before: both children were ``base defaults`` and their values tags empty, though
    concurrency changes the latency figures."""
    corpus, cases = tiny
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli("run", "-m", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                   "dataset.labels=null", "grader=none", "concurrency=1,2", "run_name=base",
                   f"tracking.uri={uri}", "progress=off", f"hydra.sweep.dir={tmp_path / 's'}",
                   f"cache_dir={tmp_path / 'c'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    parent = re.search(r"MLflow parent run ([0-9a-f]{32})", proc.stdout).group(1)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(parent)
    children = client.search_runs([run.info.experiment_id],
                                  f"tags.`mlflow.parentRunId` = '{parent}'")
    assert sorted(c.info.run_name for c in children) == ["base concurrency=1",
                                                         "base concurrency=2"]
    assert [run.data.tags[f"raglab.sweep.job.{n}.values"] for n in (0, 1)] == \
        ["concurrency=1", "concurrency=2"]
