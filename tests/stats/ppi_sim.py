"""Simulations of prediction-powered estimates in the regime users meet: a run of a few
hundred cases scored by a judge biased by +0.15 against people, 30-100 of them labelled.

Shared by the slow simulation tests (tests/stats/test_ppi_simulations.py) and the tables of
docs/labels-statistics.md (``python -m tests.stats.ppi_sim``). Every figure goes through
:func:`raglab.stats.ppi.ppi_mean` (and, for the judge-only paired interval, through
:func:`raglab.stats.paired_table`, the code behind ``raglab compare``'s rows).

Judges (each case's human value ``y``, judge value ``f``; the target is ``E[y]``):

- ``pass/fail, two-way``: ``y ~ Bernoulli(0.7)``; the judge passes 95% of the cases people
  pass and 62% of those they fail: it passes 85%, +0.15.
- ``pass/fail, lenient``: the judge passes every case people pass and half of those they
  fail (its errors all one way, the rarer and harder case for an interval).
- ``[0, 1] share``: ``y ~ Beta(3, 2)`` (mean 0.6); ``f = (1 - s) y + s`` with ``s ~ U(0,
  0.75)``: pulled towards 1 by 0.375 of the gap on average, +0.15.
- ``yes/partial/no``: people label yes / partial / no (1, 0.5, 0; 70%, 15%, 15%: mean
  0.775), the judge gives a share of supported claims: 1 for 90% of people's yes (else
  between 0.6 and 1), and people's partial or no pulled up by 0.2-1 (clipped at 1): +0.14,
  the way raglab's faithfulness is labelled and judged.
- ``uninformative``: the judge's value is independent of the human one.

Paired difference: a baseline and a candidate on the same cases; people score the
candidate about 0.05 lower than the baseline (pass/fail: it loses 15% of the baseline's
passes, gains 18% of its fails; share: each case moves by -0.05 plus noise; yes/partial/no:
half the cases are labelled afresh from 60% / 20% / 20%, -0.0375), the judge scores the
baseline without bias (noisy) and the candidate with about +0.15 (a judge that prefers the
candidate's style): the judge's difference is about +0.10, people's -0.05.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from raglab.stats.ppi import ppi_mean

KINDS = ("pass/fail, two-way", "pass/fail, lenient", "[0, 1] share", "yes/partial/no")
SCALE = np.array([0.0, 0.5, 1.0])
PEOPLE = (0.15, 0.15, 0.7)          # no, partial, yes
GRID = ((200, 30), (500, 30), (300, 60), (500, 100))
BIAS = 0.15
#: the judge-only paired interval (compare's row) is far from covering; this many runs show it
JUDGE_REPS = 500


def _ypn(N: int, rng: np.random.Generator, p=PEOPLE) -> np.ndarray:
    return rng.choice(SCALE, size=N, p=p)


def _share_judge(y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The judge's share of supported claims for yes/partial/no labels (+0.14)."""
    n = y.size
    yes = np.where(rng.random(n) < 0.9, 1.0, rng.uniform(0.6, 1.0, n))
    return np.where(y == 1.0, yes, np.clip(y + rng.uniform(0.2, 1.0, n), 0.0, 1.0))


def single(kind: str, N: int, rng: np.random.Generator, biased: bool = True):
    """``(y, f, true mean)`` of one run of ``N`` cases."""
    if kind == "yes/partial/no":
        y = _ypn(N, rng)
        return y, (_share_judge(y, rng) if biased else _ypn(N, rng)), 0.775
    if kind.startswith("pass/fail"):
        y = (rng.random(N) < 0.7).astype(float)
        if not biased:
            return y, (rng.random(N) < 0.7).astype(float), 0.7
        a, b = (0.95, (0.85 - 0.665) / 0.3) if kind.endswith("two-way") else (1.0, 0.5)
        f = np.where(y == 1, rng.random(N) < a, rng.random(N) < b).astype(float)
        return y, f, 0.7
    y = rng.beta(3, 2, N)
    if not biased:
        return y, rng.beta(3, 2, N), 0.6
    s = rng.uniform(0, 2 * BIAS / 0.4, N)
    return y, (1 - s) * y + s, 0.6


def paired(kind: str, N: int, rng: np.random.Generator):
    """``(human differences, judge differences, true difference, judge b, judge c)``."""
    if kind == "yes/partial/no":
        yb = _ypn(N, rng)
        yc = np.where(rng.random(N) < 0.5, _ypn(N, rng, (0.2, 0.2, 0.6)), yb)
        fb = np.where(rng.random(N) < 0.8, yb, _ypn(N, rng))     # noisy, no bias
        fc = _share_judge(yc, rng)
        return yc - yb, fc - fb, -0.0375, fb, fc
    if kind.startswith("pass/fail"):
        yb = (rng.random(N) < 0.7).astype(float)
        # the candidate loses 15% of the baseline's passes and gains 18.3% of its fails:
        # it passes 65%, a true difference of -0.05
        r = rng.random(N)
        yc = np.where(yb == 1, r >= 0.15, r < 0.055 / 0.3).astype(float)
        # the baseline's judge errs both ways without bias (passes 90% of passes, 23% of
        # fails: 70%); the candidate's passes 80% (+0.15), two-way or lenient
        fb = np.where(yb == 1, rng.random(N) < 0.9, rng.random(N) < 0.07 / 0.3)
        a, b = ((0.95, (0.80 - 0.65 * 0.95) / 0.35) if kind.endswith("two-way")
                else (1.0, 0.15 / 0.35))
        fc = np.where(yc == 1, rng.random(N) < a, rng.random(N) < b)
        fb, fc = fb.astype(float), fc.astype(float)
        return yc - yb, fc - fb, -0.05, fb, fc
    yb = rng.beta(3, 2, N)
    yc = np.clip(yb - 0.05 + rng.normal(0, 0.05, N), 0, 1)
    truth = float("nan")            # set by the caller from a large sample (clipping)
    s = rng.uniform(0, 2 * BIAS / (1 - 0.55), N)
    fb = np.clip(yb + rng.normal(0, 0.05, N), 0, 1)
    fc = (1 - s) * yc + s
    return yc - yb, fc - fb, truth, fb, fc


@dataclass
class Coverage:
    kind: str
    N: int
    n: int
    reps: int
    ppi: float            # share of intervals covering the human-scale truth
    judge: float          # the judge-only interval's share
    width: float          # mean width of the PPI interval
    labels_width: float   # mean width of the labels-only interval (same method, lam = 0)
    n_effective: float    # mean effective sample size
    clt: float = float("nan")   # coverage of ppi_py's normal interval (interval="clt")
    labels: float = float("nan")  # coverage of the labels-only interval (lam = 0)

    @property
    def mc_se(self) -> float:
        return math.sqrt(0.95 * 0.05 / self.reps)


def _t_interval(x: np.ndarray) -> tuple[float, float]:
    from scipy.stats import t

    h = t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return float(x.mean() - h), float(x.mean() + h)


def single_coverage(kind: str, N: int, n: int, reps: int, seed: int = 0,
                    biased: bool = True) -> Coverage:
    rng = np.random.default_rng([seed, N, n, KINDS.index(kind), biased])
    hit = judge_hit = clt = lhit = 0
    width = lwidth = neff = 0.0
    for _ in range(reps):
        y, f, mu = single(kind, N, rng, biased)
        idx = rng.choice(N, n, replace=False)
        e = ppi_mean(y[idx], f[idx], f, bounds=(0.0, 1.0))
        labels = ppi_mean(y[idx], f[idx], f, lam=0.0, bounds=(0.0, 1.0))
        normal = ppi_mean(y[idx], f[idx], f, interval="clt")
        clt += normal.ci_low <= mu <= normal.ci_high
        lhit += labels.ci_low <= mu <= labels.ci_high
        hit += e.ci_low <= mu <= e.ci_high
        lo, hi = _t_interval(f)
        judge_hit += lo <= mu <= hi
        width += e.ci_high - e.ci_low
        lwidth += labels.ci_high - labels.ci_low
        neff += e.n_effective
    return Coverage(kind, N, n, reps, hit / reps, judge_hit / reps, width / reps,
                    lwidth / reps, neff / reps, clt / reps, lhit / reps)


def _true_paired(kind: str) -> float:
    if kind.startswith("pass/fail"):
        return -0.05
    if kind == "yes/partial/no":
        return 0.5 * ((0.6 + 0.1) - (0.7 + 0.075))
    rng = np.random.default_rng(12345)
    d, *_ = paired(kind, 2_000_000, rng)
    return float(d.mean())


def paired_coverage(kind: str, N: int, n: int, reps: int, seed: int = 0) -> Coverage:
    from raglab.stats import paired_table

    rng = np.random.default_rng([seed, N, n, KINDS.index(kind), 7])
    truth = _true_paired(kind)
    metric_kind = "binary" if kind.startswith("pass/fail") else "share"
    hit = judge_hit = clt = lhit = 0
    width = lwidth = neff = 0.0
    judged = min(reps, JUDGE_REPS)
    for i in range(reps):
        d, g, _, fb, fc = paired(kind, N, rng)
        idx = rng.choice(N, n, replace=False)
        e = ppi_mean(d[idx], g[idx], g, bounds=(-1.0, 1.0))
        labels = ppi_mean(d[idx], g[idx], g, lam=0.0, bounds=(-1.0, 1.0))
        normal = ppi_mean(d[idx], g[idx], g, interval="clt")
        clt += normal.ci_low <= truth <= normal.ci_high
        lhit += labels.ci_low <= truth <= labels.ci_high
        hit += e.ci_low <= truth <= e.ci_high
        if i < judged:
            row = paired_table(fb[:, None], fc[:, None], [metric_kind], ["higher"],
                               n_resamples=500, seed=0)[0]
            judge_hit += (row.ci_low is not None and row.ci_high is not None
                          and row.ci_low <= truth <= row.ci_high)
        width += e.ci_high - e.ci_low
        lwidth += labels.ci_high - labels.ci_low
        neff += e.n_effective
    return Coverage(kind, N, n, reps, hit / reps, judge_hit / judged, width / reps,
                    lwidth / reps, neff / reps, clt / reps, lhit / reps)


def table(rows: list[Coverage], what: str) -> str:
    out = [f"| {what} | N | labels | PPI coverage | judge-only coverage | labels-only "
           "coverage | PPI width | labels-only width | effective labels | normal (clt) "
           "coverage |", "|---|---|---|---|---|---|---|---|---|---|"]
    out += [f"| {r.kind} | {r.N} | {r.n} | {r.ppi:.1%} | {r.judge:.1%} | {r.labels:.1%} | "
            f"{r.width:.3f} | {r.labels_width:.3f} | {r.n_effective:.0f} | {r.clt:.1%} |"
            for r in rows]
    return "\n".join(out)


if __name__ == "__main__":      # the tables of docs/labels-statistics.md
    import sys

    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
    print(f"A single run, {reps:,} simulated runs per row:\n")
    print(table([single_coverage(k, N, n, reps) for k in KINDS for N, n in GRID], "judge"))
    print(f"\nA paired difference, {reps:,} simulated pairs of runs per row:\n")
    print(table([paired_coverage(k, N, n, reps) for k in KINDS for N, n in GRID], "judge"))
    print(f"\nAn uninformative judge, {reps:,} runs per row:\n")
    print(table([single_coverage(k, N, n, reps, biased=False)
                 for k in (KINDS[0], KINDS[2], KINDS[3]) for N, n in GRID], "metric"))
