"""Benchmark: the paired statistics where a change moves few cases, against their goals.

Prints (and with ``--write`` puts into docs/statistics.md, between its ``regimes`` markers)
the tables of the Statistics page: coverage of the 95% interval, non-inferiority false
passes, type-I error and the printed MDE of a pass/fail metric over n x share of cases
changed x true difference; power at the printed MDE; weighted coverage (two designs); graded
shares. The simulations are tests/stats/regimes.py, the same code the slow tests assert on.

    python -m tests.benchmarks regimes [--k 2000] [--write]
"""

from __future__ import annotations

from pathlib import Path

from tests.benchmarks.common import doc_table_main
from tests.stats.regimes import (
    NS,
    SHARES,
    SMALL_GRID,
    WEIGHTED_GRID,
    binary_cell,
    deltas,
    power_at_mde,
    share_cell,
    small_share_cell,
    weighted_cell,
    weighted_heavy_cell,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "statistics.md"
BEGIN, END = "<!-- regimes:begin -->", "<!-- regimes:end -->"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def tables(k: int) -> str:
    lines = [f"Pass/fail metric, base rate 0.7, margin 0.05, {k:,} simulated data sets per "
             "row (Monte Carlo s.e. about 0.5 points at 95%):", "",
             "| n | changed | true delta | coverage | NI false pass | type-I error | "
             "mean width | median MDE |", "|---|---|---|---|---|---|---|---|"]
    for n in NS:
        for q in SHARES:
            for name, d in deltas(q):
                c = binary_cell(n, q, d, k, seed=1)
                mde = "n/a" if c["mde"] is None else f"{c['mde']:.3f}"
                lines.append(
                    f"| {n} | {100 * q:.0f}% | {name} | {_pct(c['coverage'])} | "
                    f"{_pct(c.get('ni_pass')) if 'ni_pass' in c else ''} | "
                    f"{_pct(c.get('type1')) if 'type1' in c else ''} | "
                    f"{c['width']:.3f} | {mde} |")
    lines += ["", f"Power of the two-sided test when the true difference is the MDE a record "
              f"prints ({2 * k:,} data sets each):", "",
              "| n | changed | printed MDE | power |", "|---|---|---|---|"]
    for n in NS:
        for q in (0.02, 0.06, 0.30):
            mde, power = power_at_mde(n, q, 2 * k, seed=2)
            lines.append(f"| {n} | {100 * q:.0f}% | "
                         f"{'n/a' if mde is None else f'{mde:.3f}'} | {_pct(power)} |")
    lines += ["", "Weighted cases: a fifth of the cases weigh 4x and hold most changes (8% of "
              "them change, 1% of the others):", "",
              "| n | true delta | coverage |", "|---|---|---|"]
    for n in (200, 600):
        for d in (0.0, 0.04):
            c = weighted_cell(n, k, seed=3, delta=d)
            lines.append(f"| {n} | {c['delta']:.4f} | {_pct(c['coverage'])} |")
    lines += ["", "Weighted cases, changes in the heavy ones: 200 cases, a share of them weigh "
              "4x and change at one rate, the others at another; a heavy change is a gain "
              f"with the probability shown ({k:,} data sets each):", "",
              "| heavy share | heavy change rate | other change rate | P(gain) | changed "
              "| true delta | coverage | mean width |", "|---|---|---|---|---|---|---|---|"]
    for frac, qh, ql, ph in WEIGHTED_GRID:
        c = weighted_heavy_cell(200, frac, qh, ql, ph, k, seed=5)
        lines.append(f"| {100 * frac:.0f}% | {100 * qh:.0f}% | {100 * ql:.0f}% | {ph} | "
                     f"{c['changed']:.1f} | {c['delta']:.4f} | {_pct(c['coverage'])} | "
                     f"{c['width']:.3f} |")
    kk = k // 2
    lines += ["", f"Graded share on five levels ({kk:,} data sets each; a changed case "
              "gets a fresh level, raised by 0.5 half of the time in the shifted rows):", "",
              "| n | changed | true delta | interval | coverage |", "|---|---|---|---|---|"]
    for n in (150, 500):
        for q in (0.02, 0.06, 0.30):
            for shift in (0.0, 0.5):
                c = share_cell(n, q, shift, kk, seed=4)
                lines.append(f"| {n} | {100 * q:.0f}% | {c['delta']:.4f} | "
                             f"{', '.join(c['methods'])} | {_pct(c['coverage'])} |")
    lines += ["", "Graded share whose changes are mostly small (±0.01-0.05; a gain with "
              "P(gain)), a share of them large (0.3-1, a gain with P(large gain)); data sets "
              f"with 50 or more changes left out ({k:,} each):", "",
              "| n | changed (mean) | P(gain) | large | P(large gain) | true delta | interval | "
              "coverage | mean width |", "|---|---|---|---|---|---|---|---|---|"]
    for n, q, p, big, pb in SMALL_GRID:
        c = small_share_cell(n, q, p, big, pb, k, seed=6)
        lines.append(f"| {n} | {c['changed']:.1f} | {p} | {100 * big:.0f}% | {pb} | "
                     f"{c['delta']:.4f} | {', '.join(c['methods'])} | "
                     f"{_pct(c['coverage'])} | {c['width']:.4f} |")
    return "\n".join(lines)


def main(args: list[str] | None = None) -> None:
    doc_table_main("python -m tests.benchmarks regimes", args, tables, 2000, DOC, BEGIN, END,
                   "row")


if __name__ == "__main__":
    main()
