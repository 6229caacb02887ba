"""Batched logging: MLflow's per-request limits, and 5,000 slice metrics read back whole
from a real sqlite store."""

from __future__ import annotations

import sqlite3

import pytest

from raglab.tracking.batching import ENTITIES_PER_BATCH, PARAMS_PER_BATCH, TAGS_PER_BATCH, batches

pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402

from raglab.tracking.mlflow_store import MlflowRun  # noqa: E402


@pytest.mark.parametrize("n_metrics, n_params, n_tags", [
    (0, 0, 0), (1, 0, 0), (1000, 0, 0), (1001, 0, 0), (5000, 0, 0), (0, 250, 0), (0, 0, 101),
    (5000, 150, 12), (999, 1, 0), (10, 350, 230), (4000, 100, 100)])
def test_batches_keep_every_entity_once_in_order_within_the_limits(n_metrics, n_params, n_tags):
    metrics = [("m", i) for i in range(n_metrics)]
    params = [("p", i) for i in range(n_params)]
    tags = [("t", i) for i in range(n_tags)]
    out = list(batches(metrics, params, tags))
    assert [x for ms, _, _ in out for x in ms] == metrics
    assert [x for _, ps, _ in out for x in ps] == params
    assert [x for _, _, ts in out for x in ts] == tags
    for ms, ps, ts in out:
        assert ms or ps or ts  # no empty request
        assert len(ps) <= PARAMS_PER_BATCH and len(ts) <= TAGS_PER_BATCH
        assert len(ms) + len(ps) + len(ts) <= ENTITIES_PER_BATCH
    total = n_metrics + n_params + n_tags
    # the fewest requests the limits allow
    fewest = max(-(-total // ENTITIES_PER_BATCH), -(-n_params // PARAMS_PER_BATCH),
                 -(-n_tags // TAGS_PER_BATCH))
    assert len(out) == fewest


def _slice_metrics(n: int) -> dict[str, float]:
    # values with no short decimal form, negatives and extremes: read back exactly
    extremes = {1: 1e-300, 2: -1.5e308, 3: 0.0}
    return {f"slice/intent/i{i % 50}/m{i // 50}": extremes.get(i, (i - n / 2) / 7)
            for i in range(n)}


def test_5000_slice_metrics_are_read_back_whole_with_their_values_and_step(tmp_path,
                                                                           monkeypatch):
    # a user's MLFLOW_ENABLE_ASYNC_LOGGING must not let a run end before its data is stored
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_LOGGING", "true")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    metrics = _slice_metrics(5000)
    params = {f"p{i}": i for i in range(150)}
    tags = {f"raglab.t{i}": f"v{i}" for i in range(12)}
    requests: list[tuple[int, int, int]] = []
    real = MlflowClient.log_batch

    def counting(self, run_id, metrics=(), params=(), tags=(), synchronous=None):
        assert synchronous is True
        requests.append((len(metrics), len(params), len(tags)))
        return real(self, run_id, metrics=metrics, params=params, tags=tags,
                    synchronous=synchronous)

    monkeypatch.setattr(MlflowClient, "log_batch", counting)
    run = MlflowRun.start(uri, "bench", "five-thousand", params, {"raglab.system": "x"})
    run.log_metrics(metrics, tags)
    run.end()
    assert sum(m for m, _, _ in requests) == 5000
    assert len([r for r in requests if r[0]]) == 6  # 5,012 entities: 6 requests, not 5,000

    got = MlflowClient(tracking_uri=uri).get_run(run.run_id)
    assert got.info.status == "FINISHED"
    assert got.data.metrics == metrics  # every key, every value exactly (float64 round trip)
    assert {k: got.data.params[k] for k in (f"p{i}" for i in range(150))} \
        == {f"p{i}": str(i) for i in range(150)}
    assert all(got.data.tags[k] == v for k, v in tags.items())
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        rows = db.execute("SELECT key, value, step, timestamp FROM metrics WHERE run_uuid = ?",
                          (run.run_id,)).fetchall()
    assert len(rows) == 5000  # one row per metric: nothing written twice
    assert {k: v for k, v, _, _ in rows} == metrics
    assert {step for _, _, step, _ in rows} == {0}
    assert len({ts for _, _, _, ts in rows}) == 1  # one timestamp for the whole run
