"""Benchmark: sweep reuse. A 3 chunk sizes x 4 ``k`` sweep of the demo (reference pipeline,
offline grader) against the three largest-``k`` runs alone (one per chunk size), each from an
empty stage cache, so what the sweep shares (an index per chunk size, retrieval at the
candidate depth, judgments of unchanged answers) is what makes the difference.

    python -m tests.benchmarks sweep [--sizes 64,128,256] [--ks 3,5,10,20]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from tests.benchmarks.common import load, python, timed_process, verdict

TARGET = 1.5


def sweep(tmp: Path, name: str, sizes: str, ks: str) -> dict:
    cmd = [python(), "-m", "raglab.cli", "run", "-m", "chunker=fixed", f"chunker.size={sizes}",
           f"k={ks}", "grader=heuristic", "tracking=none", "progress=off",
           f"hydra.sweep.dir={tmp / name}", f"cache_dir={tmp / (name + '-cache')}"]
    r = timed_process(cmd, cwd=tmp)
    work: dict[str, int] = {}
    for m in (tmp / name).glob("*/metrics.json"):
        for k, v in json.loads(m.read_text())["work"].items():
            work[k] = work.get(k, 0) + v
    r["work"] = work
    return r


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,128,256")
    ap.add_argument("--ks", default="3,5,10,20")
    a = ap.parse_args(argv)
    largest = str(max(int(k) for k in a.ks.split(",")))
    n_jobs = len(a.sizes.split(",")) * len(a.ks.split(","))
    print(f"sweep: {n_jobs} jobs (chunker.size={a.sizes} x k={a.ks}) against the "
          f"{len(a.sizes.split(','))} k={largest} runs alone ({load()})")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        alone = sweep(tmp, "alone", a.sizes, largest)
        full = sweep(tmp, "full", a.sizes, a.ks)
    ratio = full["wall"] / alone["wall"]
    cpu = full["cpu"] / alone["cpu"]
    print(f"  full sweep {full['wall']:.1f} s, largest-k runs alone {alone['wall']:.1f} s: "
          f"ratio {ratio:.2f} wall, {cpu:.2f} CPU (target <= {TARGET:g}) "
          f"[{verdict(ratio <= TARGET)}]")
    print(f"  work of the sweep: {json.dumps(full['work'])}")
    print(f"  work alone:        {json.dumps(alone['work'])}")


if __name__ == "__main__":
    main()
