"""Exact error rates of the paired pass/fail test at a non-inferiority boundary.

For ``n`` paired cases whose true difference is ``-margin`` with discordance ``psi`` (gains
``(psi - margin) / 2``, losses ``(psi + margin) / 2``), every outcome ``(gains, losses)``
is enumerated with its trinomial probability, and the test of ``delta = -margin`` is
applied to each: a *false pass* is the statistic above ``z_{1-a}`` (the interval's low end
above ``-margin``: GO at the boundary), a *false fail* below ``-z_{1-a}`` (the one-sided
test rejects ``H0: delta >= -margin``). Both should happen at most ``a`` of the time.

``python -m tests.stats.binary_exact`` prints the tables of docs/statistics.md.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, ndtri

NS = (20, 30, 50, 75, 100, 150, 200, 300)
PSIS = tuple(round(0.02 + 0.01 * i, 2) for i in range(49))      # 0.02 .. 0.50
MARGINS = (0.02, 0.05, 0.1)


def _outcomes(n: int) -> tuple[np.ndarray, np.ndarray]:
    g, lost = np.meshgrid(np.arange(n + 1.0), np.arange(n + 1.0), indexing="ij")
    keep = g + lost <= n
    return g[keep], lost[keep]


def _pmf(n: int, g: np.ndarray, lost: np.ndarray, pg: float, pl: float) -> np.ndarray:
    ties = n - g - lost
    with np.errstate(divide="ignore", invalid="ignore"):
        log = (gammaln(n + 1.0) - gammaln(g + 1) - gammaln(lost + 1) - gammaln(ties + 1)
               + (np.where(g > 0, g * np.log(pg), 0.0) if pg > 0 else np.where(g > 0, -np.inf, 0.0))
               + (np.where(lost > 0, lost * np.log(pl), 0.0) if pl > 0
                  else np.where(lost > 0, -np.inf, 0.0))
               + ties * np.log1p(-(pg + pl)))
    return np.exp(log)


def boundary_rates(zfun, level: float, ns=NS, psis=PSIS, margins=MARGINS):
    """``{(n, margin, psi): (false pass, false fail)}`` of the statistic ``zfun(g, lost,
    n, d0)`` at one-sided level ``level`` when the true difference is ``-margin``."""
    z = float(ndtri(1.0 - level))
    out = {}
    for n in ns:
        g, lost = _outcomes(n)
        for m in margins:
            s = zfun(g, lost, float(n), -m)
            up, down = s > z, s < -z
            for psi in psis:
                if psi < m - 1e-12:
                    continue
                p = _pmf(n, g, lost, (psi - m) / 2, (psi + m) / 2)
                out[(n, m, psi)] = (float(p[up].sum()), float(p[down].sum()))
    return out


def worst_by_n(rates) -> dict[int, tuple[float, float]]:
    """The worst false pass and false fail over margins and discordances, by ``n``."""
    worst: dict[int, tuple[float, float]] = {}
    for (n, _, _), (a, b) in rates.items():
        x, y = worst.get(n, (0.0, 0.0))
        worst[n] = (max(x, a), max(y, b))
    return worst


def _table() -> str:
    from raglab.stats.score import paired_z, score_z

    cols = []
    for level in (0.025, 0.05):
        for f in (score_z, paired_z):
            cols.append(worst_by_n(boundary_rates(f, level)))
    lines = ["| n | Tango, 2.5% | corrected, 2.5% | Tango, 5% | corrected, 5% |",
             "|---|---|---|---|---|"]
    for n in NS:
        cells = [f"{100 * c[n][0]:.2f}% / {100 * c[n][1]:.2f}%" for c in cols]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(_table())
