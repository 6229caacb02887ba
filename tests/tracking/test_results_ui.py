"""What the MLflow UI opens on: every metric per slice only on request
(``tracking.slice_metrics=all``), and the sweep's "best" line with its paired test."""

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli


@pytest.mark.slow  # two end-to-end runs: in the slow suite
def test_slice_metrics_all_keeps_every_metric_per_slice(tmp_path, tiny):
    from mlflow.tracking import MlflowClient

    from raglab.metrics.catalog import HEADLINE
    from raglab.tracking.keys import metric_key, parse_slice_key

    corpus, cases = tiny
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    common = [f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null",
              f"tracking.uri={uri}"]
    for name, extra in (("head", []), ("every", ["tracking.slice_metrics=all"])):
        res = run_cli("run", *common, *extra, f"hydra.run.dir={name}", f"run_name={name}",
                      cwd=tmp_path)
        assert res.returncode == 0, res.stderr
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("raglab")
    runs = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}
    headline = {metric_key(m) for m in HEADLINE} | {"n"}
    sliced = {name: {parse_slice_key(k)[2] for k in r.data.metrics if k.startswith("slice/")
                   and "/diagnosis." not in k}  # the cause counts, logged per slice anyway
              for name, r in runs.items()}
    assert sliced["head"] and sliced["head"] <= headline
    assert sliced["every"] - headline  # e.g. candidate.ndcg_at_10 per slice
    assert runs["head"].data.metrics.keys() - {k for k in runs["head"].data.metrics
                                               if k.startswith("slice/")} == \
        runs["every"].data.metrics.keys() - {k for k in runs["every"].data.metrics
                                             if k.startswith("slice/")}


def _job(root: Path, num: int, values: list[float], k: int) -> dict:
    d = root / str(num)
    d.mkdir()
    (d / "records.jsonl").write_text("".join(
        json.dumps({"case_id": f"c{i}", "metrics": {"final.evidence_recall": v}}) + "\n"
        for i, v in enumerate(values)))
    return {"num": num, "dir": d, "values": {"k": str(k)},
            "overall": {"final.evidence_recall": sum(values) / len(values)}}


def test_the_best_line_says_whether_the_best_job_beats_the_runner_up(tmp_path):
    from raglab.runner.sweep import versus_runner_up

    low = [0.0] * 10 + [1.0] * 10
    high = [1.0] * 20
    near = [0.0] * 9 + [1.0] * 11
    labels = {"k": "k"}
    jobs = [_job(tmp_path, 0, low, 1), _job(tmp_path, 1, high, 3)]
    line = versus_runner_up(jobs, ["k"], labels)
    assert line.startswith("; significantly better than the runner-up, job 0 (k=1), 0.5 ")
    assert "+0.5 [" in line and "n=20" in line
    (tmp_path / "b").mkdir()
    jobs = [_job(tmp_path / "b", 0, low, 1), _job(tmp_path / "b", 1, near, 3),
            _job(tmp_path / "b", 2, [0.0] * 20, 5)]
    line = versus_runner_up(jobs, ["k"], labels)
    assert line.startswith("; not significantly better than the runner-up, job 0 (k=1), 0.5 ")
    assert "+0.05 [" in line and "p=1 " in line
