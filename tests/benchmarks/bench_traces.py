"""Benchmark: each case of a run as an MLflow trace (``tracking.traces``), on sqlite.

    python -m tests.benchmarks traces [--part cpu|grader|scale|all] [--cases 1000]
        [--grader-cases 40] [--latency 0.2] [--small 2000] [--large 20000]

- ``cpu``: the CPU time (every thread of the process) per traced case of
  :class:`raglab.tracking.traces.TraceWriter`, building and writing ``--cases`` traces of
  demo records (spans with 50 candidates each, expectations, headline feedback; then with
  ``tracking.assessments=all``), read back and counted. Target: at most 30 ms per case.
- ``grader``: two runs of ``--grader-cases`` demo cases with ``grader=claude`` against a
  local server that answers each request after ``--latency`` s (``slow_server``, a process
  of its own), logged to MLflow with ``tracking.traces=none`` and with ``all`` (each with a
  cache of its own, so both make every call). Target: the traced run at most 10% slower
  (wall).
- ``scale``: replay runs of ``--small`` and ``--large`` cases (100 candidates each) logged
  to MLflow with ``tracking.traces=failed``: the CPU time per case at the large size over
  the small one. Target: within 1.2x (linear). (The synthetic cases fail almost all, so
  nearly every case is traced: the worst case of ``failed``.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks.common import ROOT, child_env, load, python, timed_process, verdict

TARGET_CPU_MS = 30.0
TARGET_SLOWDOWN = 1.10
TARGET_GROWTH = 1.2
DEMO = ROOT / "raglab/datasets/demo/cases.jsonl"


def _demo_records(tmp: Path) -> Path:
    """A run of the demo set (heuristic grader, no tracking): its records.jsonl."""
    cmd = [python(), "-m", "raglab.cli", "run", "grader=heuristic", "tracking=none",
           "dataset.labels=null", f"hydra.run.dir={tmp / 'demo'}", f"cache_dir={tmp / 'c'}",
           "progress=off"]
    timed_process(cmd, cwd=tmp)
    return tmp / "demo" / "records.jsonl"


def cpu(n: int) -> None:
    from mlflow.tracking import MlflowClient

    from raglab.data.dataset import load_dataset
    from raglab.data.record import read_records
    from raglab.tracking.mlflow_store import MlflowRun
    from raglab.tracking.traces import TraceWriter

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        records = read_records(_demo_records(tmp))
        ds = load_dataset("pkg://raglab/datasets/demo/corpus.jsonl", str(DEMO), None)
        by_id = {c.id: c for c in ds.cases}
        versions = json.loads((tmp / "demo" / "metrics.json").read_text())["metric_versions"]
        uri = f"sqlite:///{tmp / 'mlflow.db'}"
        MlflowClient(tracking_uri=uri)  # the store's schema, made before timing
        for assessments in ("headline", "all"):
            run = MlflowRun.start(uri, "bench", f"traces-{assessments}")
            recs, cases = [], {}
            for i in range(n):  # the demo records again and again, each a case of its own
                r = records[i % len(records)]
                cid = f"{r.case_id}#{i}"
                recs.append(r.model_copy(update={"case_id": cid}))
                cases[cid] = by_id[r.case_id]
            c0, t0 = time.process_time(), time.perf_counter()
            w = TraceWriter(uri, run.experiment_id, run.run_id, cases, versions, "heuristic",
                            False, assessments=assessments, dataset_name="demo")
            for r in recs:
                w.submit(r)
            w.close()
            cpu_s, wall = time.process_time() - c0, time.perf_counter() - t0
            n_fb = sum(1 for r in recs for m in r.metrics.values() if m is not None) \
                if assessments == "all" else None
            run.end()
            import mlflow

            mlflow.set_tracking_uri(uri)
            got = mlflow.search_traces(locations=[run.experiment_id], run_id=run.run_id,
                                       include_spans=False, return_type="list",
                                       max_results=n + 10)
            assert len(got) == n and w.failures == 0, (len(got), w.failures)
            ms = 1000 * cpu_s / n
            extra = f", {n_fb / n:.0f} feedback per case" if n_fb else ""
            print(f"  assessments={assessments}: {n} traces in {wall:.1f} s wall, "
                  f"{cpu_s:.1f} s CPU: {ms:.1f} ms CPU per traced case{extra} "
                  f"(target <= {TARGET_CPU_MS:g} ms)"
                  + (f" [{verdict(ms <= TARGET_CPU_MS)}]" if assessments == "headline" else ""))


def _slow_server(latency: float):
    p = subprocess.Popen([python(), "-m", "tests.benchmarks.slow_server", str(latency)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=child_env(), cwd=ROOT)
    assert p.stdout is not None
    return p, p.stdout.readline().strip()


def grader(n: int, latency: float) -> None:
    from tests.benchmarks.bench_grader_calls import subset
    from tests.llm.backends import ANTHROPIC

    server, url = _slow_server(latency)
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            cases = subset(tmp / "cases.jsonl", n)
            env = {k: v for k, v in child_env().items()
                   if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
            env.update({ANTHROPIC.url_var: url, ANTHROPIC.key_var: ANTHROPIC.key,
                        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
            uri = f"sqlite:///{tmp / 'mlflow.db'}"
            timed_process([python(), "-c", "from mlflow.tracking import MlflowClient; "
                           f"MlflowClient(tracking_uri={uri!r})"], env=env)  # the schema
            res: dict[str, list[float]] = {"none": [], "all": []}
            for i, mode in enumerate(("none", "all", "all", "none")):  # interleaved
                cmd = [python(), "-m", "raglab.cli", "run", "grader=claude",
                       "grader.model=bench-model", f"dataset.cases={cases}",
                       "dataset.labels=null", f"tracking.uri={uri}",
                       f"tracking.traces={mode}", f"hydra.run.dir={tmp / f'run{i}'}",
                       f"cache_dir={tmp / f'cache{i}'}", "progress=off"]
                res[mode].append(timed_process(cmd, cwd=tmp, env=env)["wall"])
    finally:
        server.communicate(timeout=30)  # its stdin closes: it stops
    none, traced = min(res["none"]), min(res["all"])
    ratio = traced / none
    print(f"  {n} demo cases, grader=claude at {latency:g} s per request: traces=none "
          f"{none:.1f} s, traces=all {traced:.1f} s wall (best of 2 each): {ratio:.2f}x "
          f"(target <= {TARGET_SLOWDOWN:g}x) [{verdict(ratio <= TARGET_SLOWDOWN)}]")


def scale(small: int, large: int) -> None:
    from tests.benchmarks.bench_replay import raglab_cmd
    from tests.benchmarks.replay_data import make

    res = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for n in (small, large):
            paths = make(tmp / f"data{n}", n, 100, 50)
            cmd = [x for x in raglab_cmd(paths, tmp / f"run{n}", tmp / "cache")
                   if x != "tracking=none"]
            cmd += ["tracking=mlflow", f"tracking.uri=sqlite:///{tmp / f'mlflow{n}.db'}",
                    "tracking.traces=failed"]
            res[n] = timed_process(cmd, cwd=tmp)
            recs = (tmp / f"run{n}" / "records.jsonl").read_text().splitlines()
            res[n]["failed"] = sum(1 for x in recs
                                   if (r := json.loads(x))["error"] or r.get("diagnosis"))
            for f in paths.values():
                f.unlink()
    for n, r in res.items():
        print(f"  {n:>6} cases ({r['failed']} failed, traced): {r['wall']:.1f} s wall, "
              f"{r['cpu']:.1f} s CPU, {1000 * r['cpu'] / n:.2f} ms CPU per case")
    growth = (res[large]["cpu"] / large) / (res[small]["cpu"] / small)
    print(f"  CPU time per case at {large} cases relative to {small}: {growth:.2f}x "
          f"(target: within {TARGET_GROWTH:g}x) [{verdict(growth <= TARGET_GROWTH)}]")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["cpu", "grader", "scale", "all"], default="all")
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--grader-cases", type=int, default=40)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--small", type=int, default=2000)
    ap.add_argument("--large", type=int, default=20000)
    a = ap.parse_args(argv)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    if a.part in ("cpu", "all"):
        print(f"traces: CPU per traced case, sqlite ({load()})", flush=True)
        cpu(a.cases)
    if a.part in ("grader", "all"):
        print(f"traces: a run with a {a.latency:g} s grader, traces on and off ({load()})",
              flush=True)
        grader(a.grader_cases, a.latency)
    if a.part in ("scale", "all"):
        print(f"traces: traces=failed at {a.small} and {a.large} cases ({load()})", flush=True)
        scale(a.small, a.large)


if __name__ == "__main__":
    main(sys.argv[1:])
