"""Benchmark: the peak memory of every command that reads a run, against the run's own peak
(replayed cases x 100 candidates, 50 slices, each command one child process, its peak RSS
from ``wait4``): the same run again with nothing left to do, a resume after a SIGKILL half
way, ``raglab compare`` of two such runs and ``raglab cases from-run``. Target: each within
1.5x the run's peak, at every size.

    python -m tests.benchmarks memory [--sizes 2000,20000]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.benchmarks.bench_replay import raglab_cmd
from tests.benchmarks.common import child_env, load, python, timed_process, verdict
from tests.benchmarks.replay_data import make

TARGET_RATIO = 1.5


def killed_half_way(cmd: list[str], records: Path, size: int) -> None:
    """Run ``cmd`` and SIGKILL it once ``records`` holds about half of ``size`` bytes."""
    p = subprocess.Popen(cmd, env=child_env(), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        while p.poll() is None:
            if records.exists() and records.stat().st_size >= size // 2:
                os.kill(p.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
    finally:
        p.wait()
    if p.returncode != -signal.SIGKILL:
        raise SystemExit(f"the run to kill ended first ({p.returncode}): use more cases")


def measure(tmp: Path, n: int) -> dict[str, float]:
    paths = make(tmp / "data", n, 100, 50)
    a, b = tmp / "run_a", tmp / "run_b"
    peaks = {"run": timed_process(raglab_cmd(paths, a, tmp / "cache_a"))["rss_mib"]}
    peaks["resume, nothing to do"] = timed_process(
        raglab_cmd(paths, a, tmp / "cache_a"))["rss_mib"]
    size = (a / "records.jsonl").stat().st_size
    killed_half_way(raglab_cmd(paths, b, tmp / "cache_b"), b / "records.jsonl", size)
    peaks["resume after a kill"] = timed_process(
        raglab_cmd(paths, b, tmp / "cache_b"))["rss_mib"]
    peaks["compare"] = timed_process(
        [python(), "-m", "raglab.cli", "compare", str(a), str(b), "--out", str(tmp / "cmp")],
        env=child_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"))["rss_mib"]
    peaks["cases from-run"] = timed_process(
        [python(), "-m", "raglab.cli", "cases", "from-run", str(a), "--out",
         str(tmp / "drafts.jsonl")])["rss_mib"]
    return peaks


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,20000",
                    help="numbers of cases, comma-separated (default 2000,20000)")
    a = ap.parse_args(argv)
    sizes = [int(x) for x in a.sizes.split(",") if x.strip()]
    print(f"memory: peak RSS of the readers of a replay run x 100 candidates, 50 slices "
          f"({load()})")
    for n in sizes:
        with tempfile.TemporaryDirectory() as d:
            peaks = measure(Path(d), n)
        run = peaks.pop("run")
        print(f"  {n:>6} cases: the run peaks at {run:.0f} MiB")
        for what, rss in peaks.items():
            ratio = rss / run
            print(f"    {what:22} {rss:7.0f} MiB  {ratio:5.2f}x the run "
                  f"(target: within {TARGET_RATIO:g}x) [{verdict(ratio <= TARGET_RATIO)}]",
                  flush=True)


if __name__ == "__main__":
    main()
