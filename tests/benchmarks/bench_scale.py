"""Benchmark: memory and scale of a replay run, ``--small`` against ``--large`` cases
(100 candidates each, 50 slices, one raglab process each): the CPU time per case at the
large size relative to the small one against its target (within 1.2x: linear growth), and
the peak resident memory of the large run against 1 GiB.

    python -m tests.benchmarks scale [--small 2000] [--large 20000]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from tests.benchmarks.bench_replay import raglab_cmd
from tests.benchmarks.common import load, timed_process, verdict
from tests.benchmarks.replay_data import make

TARGET_RSS_MIB = 1024.0
TARGET_GROWTH = 1.2  # per-case time at the large size over the small one


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=2000)
    ap.add_argument("--large", type=int, default=20000)
    a = ap.parse_args(argv)
    print(f"scale: replay runs of {a.small} and {a.large} cases x 100 candidates, 50 slices "
          f"({load()})")
    res = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for n in (a.small, a.large):
            paths = make(tmp / f"data{n}", n, 100, 50)
            res[n] = timed_process(raglab_cmd(paths, tmp / f"run{n}", tmp / "cache"))
            for f in paths.values():
                f.unlink()
            (tmp / f"run{n}" / "records.jsonl").unlink()
    for n, r in res.items():
        print(f"  {n:>6} cases: {r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU, "
              f"{1000 * r['cpu'] / n:.2f} ms CPU per case")
    growth = (res[a.large]["cpu"] / a.large) / (res[a.small]["cpu"] / a.small)
    rss = res[a.large]["rss_mib"]
    print(f"  CPU time per case at {a.large} cases relative to {a.small} cases: {growth:.2f}x "
          f"(target: within {TARGET_GROWTH:g}x) [{verdict(growth <= TARGET_GROWTH)}]")
    print(f"  peak RSS of the {a.large}-case run: {rss:.0f} MiB (target < {TARGET_RSS_MIB:g} "
          f"MiB) [{verdict(rss < TARGET_RSS_MIB)}]")


if __name__ == "__main__":
    main()
