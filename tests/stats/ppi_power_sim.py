"""Power of a prediction-powered difference at the MDE it prints, in the regime users meet.

Shared by the slow simulation test (tests/stats/test_ppi_power.py) and the table of
docs/labels-statistics.md (``python -m tests.stats.ppi_power_sim``). Every figure goes
through :func:`raglab.stats.ppi.ppi_mean` with ``power=0.8``, the code behind the ``mde``
of a human-scale difference in ``raglab compare`` and ``raglab decide``.

Each cell: the MDE printed for data with no difference (the median over data sets), then
the share of data sets whose interval excludes 0 when the true difference is that MDE, as
in docs/statistics.md's power table (the changed cases a difference needs, at least the
cell's share):

- ``no change``: every labelled pair ``yes`` in both runs (the MDE is the same for every
  data set); with the difference, the candidate fails a share MDE of the cases.
- ``pass/fail``: a share ``psi`` of the pairs changed, a gain with probability
  ``(psi + delta) / (2 psi)``, else a loss.
- ``[0, 1] share``: each pair's difference ``delta + N(0, 0.1)`` (Hall's interval).

The judge of a pass/fail run agrees with people on a case with probability ``agree``
(0.5: it knows nothing); of a share, it adds ``N(0, 0.07)`` to the difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from raglab.stats.ppi import ppi_mean

#: (kind, N, n, psi, agree)
GRID = (("no change", 200, 20, 0.0, 0.5), ("no change", 200, 20, 0.0, 0.9),
        ("no change", 200, 40, 0.0, 0.9),
        ("pass/fail", 300, 30, 0.3, 0.85), ("pass/fail", 300, 60, 0.1, 0.85),
        ("pass/fail", 300, 60, 0.3, 0.85), ("pass/fail", 300, 100, 0.2, 0.5),
        ("pass/fail", 600, 300, 0.05, 0.9),
        ("[0, 1] share", 120, 40, 0.0, 0.0), ("[0, 1] share", 300, 100, 0.0, 0.0))


def data(kind: str, N: int, n: int, psi: float, agree: float, delta: float,
         rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(human, judge on the labelled, judge on every case)`` of one paired data set."""
    if kind == "[0, 1] share":
        d = np.clip(delta + rng.normal(0, 0.1, N), -1, 1)
        fd = d + rng.normal(0, 0.07, N)
    else:
        if kind == "no change":
            yb = np.ones(N)
            yc = (rng.random(N) >= abs(delta)).astype(float)
        else:
            q = max(psi, abs(delta))
            u = rng.random(N)
            gain, loss = u < (q + delta) / 2, (u >= (q + delta) / 2) & (u < q)
            yb = rng.integers(0, 2, N).astype(float)
            yb[gain], yb[loss] = 0.0, 1.0
            yc = yb.copy()
            yc[gain], yc[loss] = 1.0, 0.0

        def judge(y: np.ndarray) -> np.ndarray:
            return np.where(rng.random(N) < agree, y, 1.0 - y)

        d, fd = yc - yb, judge(yc) - judge(yb)
    lab = rng.choice(N, n, replace=False)
    return d[lab], fd[lab], fd


@dataclass(frozen=True)
class Power:
    kind: str
    N: int
    n: int
    psi: float
    agree: float
    mde: float
    power: float
    reps: int

    @property
    def mc_se(self) -> float:
        return math.sqrt(self.power * (1 - self.power) / self.reps)


def power_at_mde(kind: str, N: int, n: int, psi: float, agree: float, reps: int,
                 seed: int = 0, null_reps: int = 200) -> Power:
    """The cell's printed MDE (median over ``null_reps`` data sets with no difference) and
    the share of ``reps`` data sets with that true difference whose interval excludes 0."""
    rng = np.random.default_rng([seed, N, n, int(psi * 1000)])
    mdes = []
    for _ in range(1 if kind == "no change" else null_reps):
        e = ppi_mean(*data(kind, N, n, psi, agree, 0.0, rng), bounds=(-1, 1), power=0.8)
        mdes.append(math.nan if e.mde is None else e.mde)
    mde = float(np.nanmedian(mdes))
    hits = 0
    for _ in range(reps):
        e = ppi_mean(*data(kind, N, n, psi, agree, -mde, rng), bounds=(-1, 1))
        hits += e.ci_high < 0.0 or e.ci_low > 0.0
    return Power(kind, N, n, psi, agree, mde, hits / reps, reps)


def table(rows: list[Power]) -> str:
    out = ["| labels | N | labelled pairs | changed | judge | printed MDE | power |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        changed = "none" if r.kind == "no change" else (
            "all" if r.kind == "[0, 1] share" else f"{r.psi:.0%}")
        judge = "+N(0, 0.07)" if r.kind == "[0, 1] share" else f"agrees {r.agree:.0%}"
        out.append(f"| {r.kind} | {r.N} | {r.n} | {changed} | {judge} | {r.mde:.3f} | "
                   f"{r.power:.1%} |")
    return "\n".join(out)


if __name__ == "__main__":
    import sys

    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    print(table([power_at_mde(*cell, reps=reps) for cell in GRID]))
