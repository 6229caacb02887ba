"""Sequential decisions on simulated pass/fail pairs (docs/sequential.md's table):

    python -m tests.benchmarks.bench_sequential [--runs 2000] [--target-share 0.5]

A non_inferior check at margin 0.05 (alpha 0.05), batches of 20, cases in random order:
how often each outcome is reached and at what share of the cases the run stops. The bets
are tuned to ``--target-share`` of the cases, as a sequential run tunes them (0.5; 0: the
untuned anytime bets). Then the limit at half the cases: the power of the fixed-n tests
at ``n / 2`` cases against 10% of cases lost (:func:`half_way_power`).
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


def run(n: int, lost: float, gained: float, runs: int, batch: int = 20, seed: int = 1,
        target_share: float = 0.5) -> tuple[dict[str, float], float]:
    rng = np.random.default_rng(seed)
    outcomes = {"pass": 0, "fail": 0, "inconclusive": 0}
    stopped = 0
    target = target_share * n if target_share > 0 else None
    for _ in range(runs):
        d = rng.choice([-1.0, 0.0, 1.0], size=n, p=[lost, 1 - lost - gained, gained])
        r = settle(d, CHECK, 0.05, interval=False, target=target)
        outcomes[r.status] += 1
        stopped += n if r.at is None else min(n, math.ceil(r.at / batch) * batch)
    return {k: v / runs for k, v in outcomes.items()}, stopped / (runs * n)


def half_way_power(n: int, lost: float = 0.10, margin: float = 0.05,
                   confidence: float = 0.95) -> tuple[float, float]:
    """Exact power, at ``n`` cases each lost with probability ``lost`` (none gained), of
    (1) the gates' fixed-n check (the paired score interval wholly below ``-margin``) and
    (2) the most powerful level-``(1 - confidence) / 2`` test of ``delta = -margin`` (a
    share ``margin`` lost, none gained) against it (Neyman-Pearson: the binomial count of
    losses, randomised at the edge). No procedure valid at that level, sequential or not,
    settles a NO-GO by case ``n`` more often than (2)."""
    from scipy.stats import binom

    from raglab.stats.score import paired_interval

    losses = np.arange(n + 1, dtype=np.float64)
    _, high = paired_interval(np.zeros(n + 1), losses, np.full(n + 1, float(n)), confidence)
    score = float(binom.pmf(losses, n, lost)[high < -margin].sum())
    level = (1.0 - confidence) / 2
    k = next(k for k in range(n + 2) if binom.sf(k - 1, n, margin) <= level)
    edge = (level - binom.sf(k - 1, n, margin)) / binom.pmf(k - 1, n, margin)
    best = float(binom.sf(k - 1, n, lost) + edge * binom.pmf(k - 1, n, lost))
    return score, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--target-share", type=float, default=0.5)
    args = ap.parse_args()
    print("| cases | comparison | pass (GO) | fail (NO-GO) | inconclusive | mean share run |")
    print("|---|---|---|---|---|---|")
    for n in (300, 600):
        for name, (lost, gained) in SCENARIOS.items():
            out, share = run(n, lost, gained, args.runs, target_share=args.target_share)
            print(f"| {n} | {name} | {out['pass']:.1%} | {out['fail']:.1%} | "
                  f"{out['inconclusive']:.1%} | {share:.0%} |")
    print()
    for n in (300, 600):
        score, best = half_way_power(n // 2)
        full, _ = half_way_power(n)
        print(f"{n} cases, 10% lost: fixed-n power at {n // 2} cases {score:.1%} (score "
              f"interval), {best:.1%} (most powerful test); at all {n} {full:.1%}")


if __name__ == "__main__":
    main()
