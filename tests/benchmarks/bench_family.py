"""Benchmark: the sweep-wide family of ``raglab compare SWEEP`` (randomised Tukey HSD over
every pair of jobs, :mod:`raglab.stats.family`): its family-wise error on null sweeps and
its time at the size of a large sweep.

- Error: ``--sweeps`` null sweeps of 6 jobs identical in distribution on 100 cases (each
  case's difficulty ``Beta(6, 4)``, mean 0.6, each job passes it with that probability:
  correlated within a case); the share of sweeps where some pair is declared separable at
  0.05 (target: at most 5%, within the Monte Carlo error).
- Time: 12 jobs x 300 cases x 14 headline metrics (graded values in [0, 1]) at the
  default 2,000 permutations (target: a few seconds).

    python -m tests.benchmarks family [--sweeps 1000] [--permutations 999]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from raglab.stats.family import tukey_hsd
from tests.stats.family_sim import familywise_error


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeps", type=int, default=1000)
    ap.add_argument("--permutations", type=int, default=999)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rate = familywise_error(args.sweeps, args.permutations)
    se = np.sqrt(max(rate * (1 - rate), 0.05 * 0.95) / args.sweeps)
    print(f"family-wise error, {args.sweeps} null sweeps of 6 jobs x 100 cases, "
          f"{args.permutations} permutations: {rate:.2%} (+-{2 * se:.1%}; target <= 5%) "
          f"in {time.perf_counter() - t0:.1f} s")
    rng = np.random.default_rng(3)
    metrics = [rng.beta(2, 2, size=(300, 12)) for _ in range(14)]
    t0 = time.perf_counter()
    for X in metrics:
        tukey_hsd(X, 2000, seed=0)
    load = os.getloadavg()[0]
    print(f"12 jobs x 300 cases x 14 metrics, 2000 permutations: "
          f"{time.perf_counter() - t0:.2f} s (target: a few seconds; load {load:.1f})")


if __name__ == "__main__":
    main()
