"""Simulations of the regimes users meet: a configuration change moves a few cases.

Shared by the slow simulation tests (tests/stats/test_regimes.py) and the benchmark that
prints the tables of docs/statistics.md (``python -m tests.benchmarks regimes``). Every
figure goes through :func:`raglab.stats.paired_table` / :func:`raglab.stats.one_sided`,
the code ``raglab compare`` and ``raglab decide`` run.

A pass/fail metric with base rate 0.7: each case is discordant with probability ``q``;
a discordant case is a gain (baseline 0, candidate 1) with probability ``(q + delta) / (2
q)``, else a loss, so the true difference is ``delta`` (``|delta| <= q``).
"""

from __future__ import annotations

import math

import numpy as np

from raglab.stats import paired_table
from raglab.stats.gates import non_inferior
from raglab.stats.paired import one_sided

BASE_RATE = 0.7
MARGIN = 0.05
NS = (50, 150, 500)
SHARES = (0.0, 0.02, 0.06, 0.30)
LEVELS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])


def binary_pairs(n: int, q: float, delta: float, k: int, rng: np.random.Generator):
    """``k`` data sets of ``n`` paired pass/fail cases (columns)."""
    if q <= 0:
        b = (rng.random((n, k)) < BASE_RATE).astype(float)
        return b, b.copy()
    u = rng.random((n, k))
    gain = u < (q + delta) / 2
    loss = (u >= (q + delta) / 2) & (u < q)
    rest = ~(gain | loss)
    # the concordant cases keep the base rate among themselves
    both = rest & (rng.random((n, k)) < BASE_RATE)
    b = np.where(loss | both, 1.0, 0.0)
    c = np.where(gain | both, 1.0, 0.0)
    return b, c


def mc_se(p: float, k: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-12) / k)


def deltas(q: float) -> list[tuple[str, float]]:
    """The true differences of a cell: 0, a third of the changed share, -margin (where a
    share q of changed cases can make it)."""
    out = [("0", 0.0)]
    if q > 0:
        out.append(("q/3", q / 3))
    if q >= MARGIN:
        out.append(("-margin", -MARGIN))
    return out


def binary_cell(n: int, q: float, delta: float, k: int, seed: int) -> dict:
    """Coverage, non-inferiority false passes (at delta = -margin), type-I error of the
    two-sided test (at delta = 0), mean width and the median printed MDE of one cell."""
    rng = np.random.default_rng([seed, n, int(q * 1000), int((delta + 1) * 1000)])
    b, c = binary_pairs(n, q, delta, k, rng)
    stats = paired_table(b, c, ["binary"] * k, ["higher"] * k)
    cover = np.mean([s.ci_low <= delta <= s.ci_high for s in stats])
    out = {"n": n, "q": q, "delta": delta, "k": k, "coverage": float(cover),
           "width": float(np.mean([s.ci_high - s.ci_low for s in stats])),
           "changed": float(np.mean(np.sum(b != c, axis=0)))}
    if delta == 0:
        out["type1"] = float(np.mean([s.p_value <= 0.05 for s in stats]))
    if delta == -MARGIN:
        out["ni_pass"] = float(np.mean([non_inferior(s, MARGIN, "higher") for s in stats]))
        ps = one_sided(b, c, [-MARGIN] * k, ["greater"] * k, kinds=["binary"] * k)
        out["not_worse_reject"] = float(np.mean([p <= 0.025 for p in ps]))
    mdes = [s.mde for s in stats if s.mde is not None]
    out["mde"] = float(np.median(mdes)) if mdes else None
    return out


def power_at_mde(n: int, q: float, k: int, seed: int) -> tuple[float | None, float | None]:
    """The MDE a record prints for data with discordance ``q`` and no difference, and the
    rejection rate of the two-sided test when the true difference is that MDE (with the
    discordance the difference needs)."""
    half = int(round(n * q / 2))
    b = np.zeros((n, 1))
    c = np.zeros((n, 1))
    b[:half, 0] = 1                      # losses
    c[half:2 * half, 0] = 1              # as many gains
    mde = paired_table(b, c, ["binary"], ["higher"])[0].mde
    if mde is None:
        return None, None
    rng = np.random.default_rng([seed, n, int(q * 1000)])
    bb, cc = binary_pairs(n, max(2 * half / n, mde), mde, k, rng)
    stats = paired_table(bb, cc, ["binary"] * k, ["higher"] * k)
    return mde, float(np.mean([s.p_value <= 0.05 for s in stats]))


def weighted_cell(n: int, k: int, seed: int, delta: float = 0.0) -> dict:
    """Two strata, one a fifth of the cases weighing 4x: changes sit mostly in the heavy
    stratum (8% of its cases) and rarely in the light one (1%)."""
    rng = np.random.default_rng([seed, n, 7])
    heavy = np.arange(n) < n // 5
    w = np.where(heavy, 4.0, 1.0)
    b = np.empty((n, k))
    c = np.empty((n, k))
    for mask, q in ((heavy, 0.08), (~heavy, 0.01)):
        bb, cc = binary_pairs(int(mask.sum()), q, delta * q / 0.08, k, rng)
        b[mask], c[mask] = bb, cc
    true = float(np.sum(w * np.where(heavy, delta, delta * 0.01 / 0.08)) / w.sum())
    stats = paired_table(b, c, ["binary"] * k, ["higher"] * k, weights=w)
    return {"n": n, "k": k, "delta": true,
            "coverage": float(np.mean([s.ci_low <= true <= s.ci_high for s in stats]))}


def share_cell(n: int, q: float, shift: float, k: int, seed: int) -> dict:
    """A graded share on five levels: a share q of the cases gets a fresh level, raised by
    ``shift`` half of the time (capped at 1)."""
    rng = np.random.default_rng([seed, n, int(q * 1000), 3])
    b = LEVELS[rng.integers(0, 5, (n, k))]
    new = LEVELS[rng.integers(0, 5, (n, k))]
    new = np.minimum(1.0, new + shift * (rng.random((n, k)) < 0.5))
    c = np.where(rng.random((n, k)) < q, new, b)
    true = q * (np.mean(np.minimum(1.0, LEVELS + shift)) / 2 + np.mean(LEVELS) / 2
                - np.mean(LEVELS))
    stats = paired_table(b, c, ["share"] * k, ["higher"] * k)
    methods = sorted({s.ci_method for s in stats})
    return {"n": n, "q": q, "delta": float(true), "k": k, "methods": methods,
            "coverage": float(np.mean([s.ci_low is not None and s.ci_high is not None
                                       and s.ci_low <= true <= s.ci_high for s in stats]))}


# (share of cases weighing 4x, change rate there, change rate elsewhere, share of changes
# that are gains): the changes sit mostly or only in the heavy cases
WEIGHTED_GRID = ((0.25, 0.10, 0.0, 0.5), (0.25, 0.20, 0.0, 0.7), (0.25, 0.20, 0.02, 0.5),
                 (0.25, 0.20, 0.02, 0.7), (0.25, 0.40, 0.02, 0.7), (0.10, 0.40, 0.0, 0.7))


def weighted_heavy_cell(n: int, frac: float, qh: float, ql: float, ph: float, k: int,
                        seed: int) -> dict:
    """A pass/fail metric whose changes sit in 4x-weighted cases: a share ``frac`` of the
    cases weighs 4, changes with probability ``qh`` there and ``ql`` elsewhere; a change is
    a gain with probability ``ph`` (in the light cases one half)."""
    rng = np.random.default_rng([seed, n, int(frac * 100), int(qh * 100), int(ql * 100),
                                 int(ph * 100)])
    heavy = np.arange(n) < int(round(n * frac))
    w = np.where(heavy, 4.0, 1.0)
    q = np.where(heavy, qh, ql)[:, None]
    p = np.where(heavy, ph, 0.5)[:, None]
    changed = rng.random((n, k)) < q
    gain = changed & (rng.random((n, k)) < p)
    loss = changed & ~gain
    both = ~changed & (rng.random((n, k)) < BASE_RATE)
    b = np.where(loss | both, 1.0, 0.0)
    c = np.where(gain | both, 1.0, 0.0)
    true = float(np.sum(w * np.where(heavy, qh * (2 * ph - 1), 0.0)) / w.sum())
    stats = paired_table(b, c, ["binary"] * k, ["higher"] * k, weights=w)
    return {"n": n, "k": k, "delta": true, "changed": float(changed.sum(0).mean()),
            "coverage": float(np.mean([s.ci_low <= true <= s.ci_high for s in stats])),
            "width": float(np.mean([s.ci_high - s.ci_low for s in stats]))}


# (n, share of cases changed, P(a small change is a gain), share of changes that are large,
# P(a large change is a gain)): fewer than 50 changed cases, the score-bound regime
SMALL_GRID = ((150, 0.2, 0.5, 0.0, 0.5), (150, 0.2, 1.0, 0.0, 0.5),
              (300, 0.1, 0.75, 0.0, 0.5), (500, 0.08, 1.0, 0.0, 0.5),
              (150, 0.1, 1.0, 0.1, 0.0), (150, 0.25, 0.5, 0.1, 1.0),
              (300, 0.12, 0.75, 0.1, 0.0), (150, 0.1, 0.5, 0.3, 0.0))


def small_share_cell(n: int, q: float, p: float, big: float, pb: float, k: int,
                     seed: int) -> dict:
    """A graded share whose changes are mostly small: a share ``q`` of the cases changes, by
    +-0.01..0.05 (a gain with probability ``p``), or, for a share ``big`` of the changes,
    by 0.3..1 (a gain with probability ``pb``). Data sets with 50 or more changed cases
    (the bootstrap-t's) are left out."""
    rng = np.random.default_rng([seed, n, int(q * 100), int(p * 100), int(big * 100),
                                 int(pb * 100)])
    changed = rng.random((n, k)) < q
    large = rng.random((n, k)) < big
    size = np.where(large, rng.uniform(0.3, 1.0, (n, k)), rng.uniform(0.01, 0.05, (n, k)))
    up = rng.random((n, k)) < np.where(large, pb, p)
    d = np.where(changed, np.where(up, size, -size), 0.0)
    keep = changed.sum(axis=0) < 50
    d = d[:, keep]
    base = np.where(d < 0, 1.0, 0.0)
    cand = base + d
    true = q * ((1 - big) * 0.03 * (2 * p - 1) + big * 0.65 * (2 * pb - 1))
    kk = d.shape[1]
    stats = paired_table(base, cand, ["share"] * kk, ["higher"] * kk)
    return {"n": n, "k": kk, "delta": float(true), "changed": float(changed[:, keep].sum(0).mean()),
            "methods": sorted({s.ci_method for s in stats}),
            "coverage": float(np.mean([s.ci_low <= true <= s.ci_high for s in stats])),
            "width": float(np.mean([s.ci_high - s.ci_low for s in stats]))}
