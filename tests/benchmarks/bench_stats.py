"""Benchmark: paired statistics of two 20,000-case runs x 150 metrics, overall and 50 slices.

Synthetic per-case metrics shaped like a real run: shares (graded retrieval and generation
scores, many ties at 0 and 1), binary pass/fail metrics, ranks, token counts, latencies and
costs; retrieval metrics apply only to answerable cases (80%), generation metrics only to
answered ones (90% of those), latency and cost to all. 50 slices = 5 tag keys x 10 values,
so every case is in 5 slices. ``paired_table`` is called once overall and once per slice,
as ``raglab compare`` does. Then, on a small case, the same interval and p-value are timed
against ``scipy.stats.bootstrap`` and ``scipy.stats.permutation_test``.

    python tests/benchmarks/bench_stats.py [--cases 20000] [--metrics 150] [--resamples 2000]
    python tests/benchmarks/bench_stats.py --coverage   # BCa vs percentile coverage by n

``--coverage`` measures, over 4,000 simulated data sets per cell, how often the BCa and the
percentile intervals miss the true difference on each side, for the share-like metric of
tests/stats/test_simulations.py and a skewed latency-like one (lognormal baseline, the
candidate a lognormal factor of it).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from raglab.stats import paired_table

TAG_KEYS, TAG_VALUES = 5, 10


def make_runs(n_cases: int, n_metrics: int, seed: int = 7):
    rng = np.random.default_rng(seed)
    kinds, directions, masks = [], [], []
    answerable = rng.random(n_cases) < 0.8
    answered = answerable & (rng.random(n_cases) < 0.9)
    everyone = np.ones(n_cases, dtype=bool)
    base = np.empty((n_cases, n_metrics))
    cand = np.empty((n_cases, n_metrics))
    quality = rng.random(n_cases)                      # per-case difficulty, shared by metrics
    for j in range(n_metrics):
        r = j % 10
        if r < 5:       # graded share, retrieval: ties at 0 and 1
            kind, direction, mask = "share", "higher", answerable
            b = np.clip(quality + rng.normal(0, 0.3, n_cases), 0, 1).round(2)
            c = np.clip(b + rng.normal(0.01, 0.15, n_cases), 0, 1).round(2)
        elif r < 7:     # binary pass/fail
            kind, direction, mask = "binary", "higher", answerable if r == 5 else answered
            b = (rng.random(n_cases) < quality).astype(float)
            flip = rng.random(n_cases) < 0.1
            c = np.where(flip, 1 - b, b)
        elif r == 7:    # generation share
            kind, direction, mask = "share", "higher", answered
            b = rng.beta(5, 2, n_cases)
            c = np.clip(b + rng.normal(0, 0.1, n_cases), 0, 1)
        elif r == 8:    # latency / tokens / rank
            kind, direction, mask = ("latency", "lower", everyone) if j % 20 < 10 else \
                ("count", "none", answered)
            b = rng.lognormal(6, 0.5, n_cases)
            c = b * rng.lognormal(0.02, 0.1, n_cases)
        else:           # cost
            kind, direction, mask = "cost", "lower", everyone
            b = rng.gamma(2, 1e-4, n_cases)
            c = b * 1.05
        base[:, j] = np.where(mask, b, np.nan)
        cand[:, j] = np.where(mask, c, np.nan)
        kinds.append(kind)
        directions.append(direction)
        masks.append(mask)
    tags = rng.integers(0, TAG_VALUES, size=(n_cases, TAG_KEYS))
    return base, cand, kinds, directions, tags


def bench_table(n_cases: int, n_metrics: int, n_resamples: int) -> None:
    base, cand, kinds, directions, tags = make_runs(n_cases, n_metrics)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    overall = paired_table(base, cand, kinds, directions, n_resamples=n_resamples)
    t_overall = time.perf_counter() - t0
    t1 = time.perf_counter()
    rows = len(overall)
    for key in range(TAG_KEYS):
        for value in range(TAG_VALUES):
            sel = tags[:, key] == value
            rows += len(paired_table(base[sel], cand[sel], kinds, directions,
                                     n_resamples=n_resamples))
    t_slices = time.perf_counter() - t1
    total = t_overall + t_slices
    cpu = time.process_time() - cpu0
    print(f"paired_table: {n_cases} cases x {n_metrics} metrics, {n_resamples} resamples")
    print(f"  overall              {t_overall:7.2f} s")
    print(f"  {TAG_KEYS * TAG_VALUES} slices            {t_slices:7.2f} s")
    print(f"  total ({rows} rows)  {total:7.2f} s   (CPU time, all threads: {cpu:.1f} s; "
          f"load average {os.getloadavg()[0]:.1f})")


def bench_scipy(n: int = 200, n_resamples: int = 2000, repeats: int = 5) -> None:
    from scipy import stats

    rng = np.random.default_rng(3)
    b = rng.random(n)
    c = np.clip(b + rng.normal(0.03, 0.2, n), 0, 1)
    d = c - b

    def mean_diff(x, y, axis=-1):
        return np.mean(y - x, axis=axis)

    t0 = time.perf_counter()
    for _ in range(repeats):
        paired_table(b[:, None], c[:, None], ["share"], ["higher"], n_resamples=n_resamples)
    ours = (time.perf_counter() - t0) / repeats
    t0 = time.perf_counter()
    for _ in range(repeats):
        stats.bootstrap((d,), np.mean, method="BCa", n_resamples=n_resamples, rng=0)
        stats.permutation_test((b, c), mean_diff, permutation_type="samples",
                               n_resamples=n_resamples, vectorized=True, rng=0)
    theirs = (time.perf_counter() - t0) / repeats
    print(f"one metric, n={n}, {n_resamples} resamples (BCa interval + permutation p):")
    print(f"  raglab.stats {ours * 1e3:7.1f} ms   scipy.stats {theirs * 1e3:7.1f} ms   "
          f"ratio scipy/raglab {theirs / ours:5.1f}x")
    k = 150
    B = np.repeat(b[:, None], k, axis=1)
    C = np.clip(B + rng.normal(0.0, 0.2, B.shape), 0, 1)
    t0 = time.perf_counter()
    paired_table(B, C, ["share"] * k, ["higher"] * k, n_resamples=n_resamples)
    ours_k = time.perf_counter() - t0
    t0 = time.perf_counter()
    for j in range(k):
        stats.bootstrap((C[:, j] - B[:, j],), np.mean, method="BCa",
                        n_resamples=n_resamples, rng=j)
        stats.permutation_test((B[:, j], C[:, j]), mean_diff, permutation_type="samples",
                               n_resamples=n_resamples, vectorized=True, rng=j)
    theirs_k = time.perf_counter() - t0
    print(f"{k} metrics, n={n}: raglab.stats {ours_k:6.2f} s   scipy.stats {theirs_k:6.2f} s   "
          f"ratio {theirs_k / ours_k:5.1f}x")


def coverage_table(sizes=(50, 150, 400), sets: int = 4000) -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stats"))
    from test_simulations import _share_pairs

    mu, s1, m2, s2 = 6.0, 0.8, 0.05, 0.3
    latency_truth = float(np.exp(mu + s1 ** 2 / 2) * (np.exp(m2 + s2 ** 2 / 2) - 1))

    def make(kind, rng, n, k):
        if kind == "share":
            return _share_pairs(rng, n, k, power=0.85)
        b = rng.lognormal(mu, s1, (n, k))
        return b, b * rng.lognormal(m2, s2, (n, k)), latency_truth

    print("metric   n    interval    truth<low truth>high coverage")
    for kind in ("share", "latency"):
        for n in sizes:
            for interval in ("bca", "percentile"):
                low = high = 0
                for seed in range(4):
                    b, c, truth = make(kind, np.random.default_rng(seed), n, sets // 4)
                    for st in paired_table(b, c, [kind] * b.shape[1], ["higher"] * b.shape[1],
                                           seed=seed, interval=interval):
                        low += truth < st.ci_low
                        high += truth > st.ci_high
                print(f"{kind:8s} {n:4d} {interval:11s} {low / sets:9.4f} {high / sets:10.4f} "
                      f"{1 - (low + high) / sets:8.4f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=20000)
    ap.add_argument("--metrics", type=int, default=150)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--coverage", action="store_true",
                    help="print the BCa/percentile coverage table instead")
    args = ap.parse_args()
    if args.coverage:
        coverage_table()
        return
    bench_table(args.cases, args.metrics, args.resamples)
    bench_scipy(n_resamples=args.resamples)


if __name__ == "__main__":
    main()
