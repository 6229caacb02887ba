"""Sequential decisions on simulated pass/fail pairs (docs/sequential.md's table):

    python -m tests.benchmarks.bench_sequential [--runs 2000]

A non_inferior check at margin 0.05 (alpha 0.05), batches of 20, cases in random order:
how often each outcome is reached and at what share of the cases the run stops.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from raglab.sequential.settle import settle
from raglab.stats.settle import Condition

CHECK = [Condition("above", -0.05)]
#: name -> (share of cases lost, share gained)
SCENARIOS = {"identical outputs": (0.0, 0.0), "10% of cases lost": (0.10, 0.0),
             "true change = -margin": (0.10, 0.05), "nothing changed (10% flip)": (0.05, 0.05)}


def run(n: int, lost: float, gained: float, runs: int, batch: int = 20, seed: int = 1
        ) -> tuple[dict[str, float], float]:
    rng = np.random.default_rng(seed)
    outcomes = {"pass": 0, "fail": 0, "inconclusive": 0}
    stopped = 0
    for _ in range(runs):
        d = rng.choice([-1.0, 0.0, 1.0], size=n, p=[lost, 1 - lost - gained, gained])
        r = settle(d, CHECK, 0.05, interval=False)
        outcomes[r.status] += 1
        stopped += n if r.at is None else min(n, math.ceil(r.at / batch) * batch)
    return {k: v / runs for k, v in outcomes.items()}, stopped / (runs * n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=2000)
    args = ap.parse_args()
    print("| cases | comparison | pass (GO) | fail (NO-GO) | inconclusive | mean share run |")
    print("|---|---|---|---|---|---|")
    for n in (300, 600):
        for name, (lost, gained) in SCENARIOS.items():
            out, share = run(n, lost, gained, args.runs)
            print(f"| {n} | {name} | {out['pass']:.1%} | {out['fail']:.1%} | "
                  f"{out['inconclusive']:.1%} | {share:.0%} |")


if __name__ == "__main__":
    main()
