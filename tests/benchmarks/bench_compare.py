"""Benchmark: ``raglab compare`` of two synthetic 20,000-case runs, end to end.

Each run is a records.jsonl + metrics.json in a temporary directory: every metric a default
run reports at cutoffs 1..100 plus latency (about 150 metrics), and 50 slice values (three
tag keys plus answerable). Prints the time of each phase against the target "under a minute"
(issue: vectorised resampling, not a Python loop per resample), then the statistics of the
comparison side by side with numpy's BLAS threads as they come (one per core) and limited to
one (raglab.stats.threads, the default), each on an idle core and beside a busy loop on the
other (target: under 10 s either way on 2 cores).

    python tests/benchmarks/bench_compare.py [--cases 20000] [--resamples 2000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from raglab.metrics.case import metric_names
from raglab.metrics.catalog import spec_of

TARGET_S = 60.0


def make_run(path: Path, n: int, names: list[str], shift: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    base_rng = np.random.default_rng(1)          # the same cases in both runs
    tags = {"intent": base_rng.integers(0, 30, n), "source": base_rng.integers(0, 10, n),
            "difficulty": base_rng.integers(0, 8, n)}
    answerable = base_rng.random(n) > 0.2
    kinds = [spec_of(m).kind if spec_of(m) else "share" for m in names]
    path.mkdir(parents=True)
    with open(path / "records.jsonl", "w", encoding="utf-8") as fh:
        for i in range(n):
            metrics = {}
            for name, kind in zip(names, kinds):
                if kind == "binary":
                    v = float(rng.random() < 0.7 + shift)
                elif kind in ("latency", "count", "cost", "rank"):
                    v = float(rng.gamma(2.0, 50.0))
                else:
                    v = float(min(1.0, max(0.0, rng.beta(4, 2) + shift)))
                metrics[name] = None if (not answerable[i] and name.startswith(
                    ("candidate.", "final.")) and kind != "count") else v
            rec = {"case_id": f"case-{i:05d}",
                   "tags": {k: f"{k}-{int(v[i])}" for k, v in tags.items()},
                   "gold": {"answerable": bool(answerable[i])},
                   "output": {"answer": f"answer {i}"}, "metrics": metrics,
                   "diagnosis": None if rng.random() < 0.6 else {"causes": ["retrieval"]}}
            fh.write(json.dumps(rec) + "\n")
    versions = {f: "v1" for f in ("retrieval", "faithfulness", "citations", "correctness",
                                  "relevance", "nuggets", "abstention")}
    (path / "metrics.json").write_text(json.dumps({"overall": {}, "slices": {},
                                                   "metric_versions": versions, "n_cases": n}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=20000)
    ap.add_argument("--resamples", type=int, default=2000)
    args = ap.parse_args()
    names = metric_names([1, 3, 5, 10, 20, 50, 100], 100, 100)
    names += ["latency_ms.retrieve", "latency_ms.rerank", "latency_ms.generate"]
    names += [f"latency_ms.step{i}" for i in range(47)]   # ~150 metrics in all
    names = list(dict.fromkeys(names))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        make_run(tmp / "base", args.cases, names, 0.0, 2)
        make_run(tmp / "cand", args.cases, names, 0.01, 3)
        print(f"synthetic runs: {args.cases} cases x {len(names)} metrics "
              f"({time.perf_counter() - t0:.1f} s to write)")
        import raglab.stats as stats
        from raglab.commands.common import write_outputs
        from raglab.commands.compare import default_out
        from raglab.compare.comparison import CompareCfg, compare_runs, load_run
        from raglab.compare.render import render_md, render_terminal
        from raglab.compare.render_html import render_html

        spent = [0.0]
        real_table = stats.paired_table

        def timed_table(*a, **kw):   # how much of "compare" is the statistics itself
            s0 = time.perf_counter()
            try:
                return real_table(*a, **kw)
            finally:
                spent[0] += time.perf_counter() - s0

        stats.paired_table = timed_table
        cfg = CompareCfg(n_bootstrap=args.resamples)
        t = {}
        start = time.perf_counter()
        cpu0 = time.process_time()
        base, cand = load_run(str(tmp / "base")), load_run(str(tmp / "cand"))
        t["load"] = time.perf_counter() - start
        s = time.perf_counter()
        comp = compare_runs(base, cand, cfg)
        t["compare"] = time.perf_counter() - s
        s = time.perf_counter()
        files = {"compare.md": render_md(comp), "compare.html": render_html(comp),
                 "compare.json": json.dumps(comp.to_json(), allow_nan=False)}
        write_outputs(default_out(base, cand), files)
        render_terminal(comp)
        t["render+write"] = time.perf_counter() - s
        total = time.perf_counter() - start
        cpu = time.process_time() - cpu0
        print(f"slices: {len(comp.slices)}, rows: {len(comp.rows)}, "
              f"adjusted family: {comp.settings['family_size']}")
        print("  ".join(f"{k} {v:.1f} s" for k, v in t.items())
              + f"  (of compare: paired_table {spent[0]:.1f} s)")
        print(f"CPU time of this process: {cpu:.1f} s (wall time drifts on a loaded machine)")
        verdict = "OK" if total < TARGET_S else "TOO SLOW"
        print(f"end to end: {total:.1f} s (target under {TARGET_S:.0f} s): {verdict}")
        stats.paired_table = real_table
        slow = threads_side_by_side(base, cand, cfg)
        sys.exit(0 if total < TARGET_S and slow < THREADS_TARGET_S else 1)


THREADS_TARGET_S = 10.0


def threads_side_by_side(base, cand, cfg) -> float:
    """compare_runs with BLAS threads unlimited and limited to one, idle and beside a busy
    loop; returns the slowest limited wall time."""
    import os
    import subprocess

    import raglab.stats.threads as threads
    from raglab.compare.comparison import compare_runs

    def timed(limit):
        threads.BLAS_THREADS = limit
        w0, c0 = time.perf_counter(), time.process_time()
        compare_runs(base, cand, cfg)
        return time.perf_counter() - w0, time.process_time() - c0

    worst = 0.0
    for busy in (False, True):
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
        try:
            unlimited, limited = timed(None), timed(1)
        finally:
            if hog is not None:
                hog.kill()
                hog.wait()
            threads.BLAS_THREADS = 1
        worst = max(worst, limited[0])
        print(f"compare_runs, {'a busy loop on another core' if busy else 'idle'} "
              f"(load {os.getloadavg()[0]:.1f}): BLAS threads unlimited {unlimited[0]:.1f} s "
              f"wall / {unlimited[1]:.1f} s CPU, one thread {limited[0]:.1f} s / "
              f"{limited[1]:.1f} s CPU (ratio {unlimited[0] / limited[0]:.2f}x wall)")
    verdict = "OK" if worst < THREADS_TARGET_S else "TOO SLOW"
    print(f"statistics with one BLAS thread: {worst:.1f} s at worst (target under "
          f"{THREADS_TARGET_S:.0f} s): {verdict}")
    return worst


if __name__ == "__main__":
    main()
