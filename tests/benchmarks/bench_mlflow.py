"""Benchmark: a whole run with 5,000 slice metrics logged to a local sqlite MLflow store,
through raglab's tracking, against plain MLflow batches and against one call per metric.

    python -m tests.benchmarks mlflow [--metrics 5000] [--params 150] [--repeat 5] [--single 500]

A run is timed from ``MlflowRun.start`` (experiment lookup, run creation, params, tags) to
its end (status FINISHED): every metric, its final tags and its end. After each run, every
metric is read back through MLflow and compared (count and values). Side by side, in the same
store and process, interleaved:

- raglab: ``MlflowRun.start`` -> ``log_metrics(metrics, tags)`` -> ``end()``;
- plain batches: the same data with ``MlflowClient.log_batch``, params and tags in 100s and
  metrics in 1,000s (MLflow's limits), with nothing else done (what raglab did before);
- one call per metric: ``MlflowClient.log_metric``, timed on ``--single`` metrics and scaled.

Printed apart, once per process or store: importing mlflow, creating the store (its schema)
and opening the existing store in a new process.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks.common import child_env, load, verdict

TARGET_S = 1.0

_OPEN = """
import json, time
t0 = time.perf_counter()
import mlflow.tracking
t1 = time.perf_counter()
from raglab.tracking.mlflow_store import MlflowRun
run = MlflowRun.start({uri!r}, "bench", "open")
t2 = time.perf_counter()
run.end()
print(json.dumps({{"import": t1 - t0, "open_and_start": t2 - t1}}))
"""


class _CollectorClock:
    """Time spent in Python's cyclic garbage collector (gc.callbacks)."""

    def __init__(self):
        self.total = 0.0
        self._t0 = 0.0
        gc.callbacks.append(self._cb)

    def _cb(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._t0


def _plain_run(uri: str, exp_id: str, metrics: dict, params: dict, tags: dict) -> str:
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    run_id = client.create_run(exp_id, run_name="plain").info.run_id
    ps = [Param(k, str(v)) for k, v in params.items()]
    for i in range(0, len(ps), 100):
        client.log_batch(run_id, params=ps[i:i + 100])
    ts = int(time.time() * 1000)
    ms = [Metric(k, float(v), ts, 0) for k, v in metrics.items()]
    for i in range(0, len(ms), 1000):
        client.log_batch(run_id, metrics=ms[i:i + 1000])
    tg = [RunTag(k, v) for k, v in tags.items()]
    for i in range(0, len(tg), 100):
        client.log_batch(run_id, tags=tg[i:i + 100])
    client.set_terminated(run_id, "FINISHED")
    return run_id


def _check(uri: str, run_id: str, metrics: dict) -> int:
    """The number of metrics read back; fails loudly unless every one came back exactly."""
    from mlflow.tracking import MlflowClient

    run = MlflowClient(tracking_uri=uri).get_run(run_id)
    got = run.data.metrics
    if run.info.status != "FINISHED" or got != metrics:
        missing = len(metrics.keys() - got.keys())
        wrong = sum(1 for k, v in metrics.items() if k in got and got[k] != v)
        raise SystemExit(f"run {run_id}: {run.info.status}, {len(got)} metrics read back, "
                         f"{missing} missing, {wrong} with another value")
    return len(got)


def _span(xs: list[float], fmt: str = "{:.2f}") -> str:
    lo, hi = min(xs), max(xs)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else \
        f"{fmt.format(lo)}-{fmt.format(hi)}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", type=int, default=5000)
    ap.add_argument("--params", type=int, default=150, help="flattened config entries")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--single", type=int, default=500)
    a = ap.parse_args(argv)

    imported = "mlflow" in sys.modules
    t0 = time.perf_counter()
    import mlflow.tracking  # noqa: F401
    t_import = None if imported else time.perf_counter() - t0
    from raglab.tracking.mlflow_store import MlflowRun

    metrics = {f"slice/intent/i{i % 50}/m{i // 50}": (i % 997) / 997 for i in range(a.metrics)}
    params = {f"cfg.section{i // 10}.key{i}": f"value-{i}" for i in range(a.params)}
    start_tags = {"raglab.version": "bench", "raglab.dataset": "bench",
                  "raglab.dataset.cases_sha256": "ab" * 32, "raglab.self_graded": "false"}
    final_tags = {f"raglab.metric_version.family{i}": str(i) for i in range(8)}
    final_tags["raglab.run_dir"] = "/tmp/bench/run"
    final_tags["mlflow.note.content"] = "description " * 300

    raglab_t: list[float] = []
    raglab_cpu: list[float] = []
    raglab_gc: list[float] = []
    plain_gc: list[float] = []
    collector = _CollectorClock()
    plain_cpu: list[float] = []
    split: dict[str, list[float]] = {"start": [], "metrics": [], "end": []}
    plain_t: list[float] = []
    read_back: list[int] = []
    with tempfile.TemporaryDirectory() as d:
        uri = f"sqlite:///{Path(d) / 'mlflow.db'}"
        t0 = time.perf_counter()
        first = MlflowRun.start(uri, "bench", "first")  # creates the schema
        t_create = time.perf_counter() - t0
        first.end()
        for rep in range(a.repeat):
            g0, c0, t0 = collector.total, time.process_time(), time.perf_counter()
            run = MlflowRun.start(uri, "bench", f"raglab-{rep}", params, start_tags)
            t1 = time.perf_counter()
            run.log_metrics(metrics, final_tags)
            t2 = time.perf_counter()
            run.end()
            t3 = time.perf_counter()
            raglab_cpu.append(time.process_time() - c0)
            raglab_gc.append(collector.total - g0)
            raglab_t.append(t3 - t0)
            for k, v in zip(split, (t1 - t0, t2 - t1, t3 - t2)):
                split[k].append(v)
            read_back.append(_check(uri, run.run_id, metrics))

            g0, c0, t0 = collector.total, time.process_time(), time.perf_counter()
            plain_id = _plain_run(uri, first.experiment_id, metrics, params,
                                  {**start_tags, **final_tags})
            plain_t.append(time.perf_counter() - t0)
            plain_cpu.append(time.process_time() - c0)
            plain_gc.append(collector.total - g0)
            read_back.append(_check(uri, plain_id, metrics))

        one = MlflowRun.start(uri, "bench", "single")
        ts = int(time.time() * 1000)
        items = list(metrics.items())[:a.single]
        t0 = time.perf_counter()
        for k, v in items:
            one._client.log_metric(one.run_id, k, v, ts, 0)
        single = (time.perf_counter() - t0) * a.metrics / len(items)
        one.end()

        p = subprocess.run([sys.executable, "-c", _OPEN.format(uri=uri)], env=child_env(),
                           capture_output=True, text=True)
        opened = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None

    best = min(raglab_t)
    print(f"mlflow: a run with {a.metrics} slice metrics, {a.params} params and "
          f"{len(start_tags) + len(final_tags)} tags to sqlite, {a.repeat} runs each ({load()})")
    under = sum(t < TARGET_S for t in raglab_t)
    print(f"  raglab, start to end: {_span(raglab_t)} s, median "
          f"{statistics.median(raglab_t):.2f} s (target < {TARGET_S:g} s: "
          f"{verdict(under == len(raglab_t))}, {under} of {len(raglab_t)} runs under it); "
          f"runs in order {' '.join(f'{t:.2f}' for t in raglab_t)}; CPU {_span(raglab_cpu)} s")
    print(f"    start {_span(split['start'])} s, metrics and final tags "
          f"{_span(split['metrics'])} s, end {_span(split['end'], '{:.3f}')} s; in the "
          f"garbage collector {_span(raglab_gc)} s")
    print(f"  plain MLflow batches (1,000 metrics, 100 params/tags per request): "
          f"{_span(plain_t)} s, CPU {_span(plain_cpu)} s; raglab/plain wall "
          f"{_span([r / p for r, p in zip(raglab_t, plain_t)])}, CPU "
          f"{_span([r / p for r, p in zip(raglab_cpu, plain_cpu)])}; in the garbage "
          f"collector {_span(plain_gc)} s")
    print(f"  one call per metric: {single:.1f} s (from {len(items)} calls); "
          f"{single / best:.0f}x the best raglab run")
    print(f"  read back: {min(read_back)} of {a.metrics} metrics, every value equal, "
          f"in each of {len(read_back)} runs")
    once = [f"creating the store {t_create:.2f} s"]
    if t_import is not None:
        once.insert(0, f"import mlflow {t_import:.2f} s")
    if opened:
        once.append(f"a new process: import {opened['import']:.2f} s, opening the store and "
                    f"starting a run {opened['open_and_start']:.2f} s")
    print("  once per process or store (not in the figures above): " + "; ".join(once))


if __name__ == "__main__":
    main()
