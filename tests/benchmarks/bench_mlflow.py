"""Benchmark: logging a run with 5,000 slice metrics to a local sqlite MLflow store, batched
(raglab's tracking, 1,000 metrics per request) against one call per metric.

    python -m tests.benchmarks mlflow [--metrics 5000] [--single 500]

One call per metric is timed on ``--single`` metrics and scaled to the full count.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tests.benchmarks.common import load, verdict

TARGET_S = 1.0


def main(argv: list[str] | None = None) -> None:
    from raglab.tracking.mlflow_store import MlflowRun

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", type=int, default=5000)
    ap.add_argument("--single", type=int, default=500)
    a = ap.parse_args(argv)
    metrics = {f"slice/intent/i{i % 50}/m{i // 50}": i / a.metrics for i in range(a.metrics)}
    with tempfile.TemporaryDirectory() as d:
        uri = f"sqlite:///{Path(d) / 'mlflow.db'}"
        run = MlflowRun.start(uri, "bench", "batched")
        t0 = time.perf_counter()
        run.log_metrics(metrics)
        batched = time.perf_counter() - t0
        one = MlflowRun.start(uri, "bench", "single")
        ts = int(time.time() * 1000)
        t0 = time.perf_counter()
        for k, v in list(metrics.items())[:a.single]:
            one._client.log_metric(one.run_id, k, v, ts, 0)
        single = (time.perf_counter() - t0) * a.metrics / a.single
    print(f"mlflow: {a.metrics} slice metrics to sqlite ({load()})")
    print(f"  batched: {batched:.2f} s (target < {TARGET_S:g} s) [{verdict(batched < TARGET_S)}]; "
          f"one call per metric: {single:.1f} s (from {a.single} calls); "
          f"{single / batched:.0f}x faster")


if __name__ == "__main__":
    main()
