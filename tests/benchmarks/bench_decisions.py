"""Benchmark: the error rates of the decisions against their goals (docs/statistics.md,
"Error rates of the decisions").

For each gate rule, metric kind, number of paired cases and share of cases changed: how
often a check passes (GO) at a true change of exactly the margin the wrong way, fails
(NO-GO) there, fails with nothing changed, and is inconclusive. Goals: GO at the breach
and NO-GO with nothing changed at most 2.5% (and a not_worse check, which includes the
margin in its null hypothesis, fails there at most 2.5%). The simulations are
tests/stats/decisions_sim.py, the same code the slow test asserts on. With ``--write`` the
table goes into docs/statistics.md between its ``decisions`` markers.

    python -m tests.benchmarks decisions [--k 4000] [--write]
"""

from __future__ import annotations

from pathlib import Path

from tests.benchmarks.common import doc_table_main
from tests.stats.decisions_sim import CHANGED, ERRORS, KINDS, MARGIN, NS, cell, mc_se

DOC = Path(__file__).resolve().parents[2] / "docs" / "statistics.md"
BEGIN, END = "<!-- decisions:begin -->", "<!-- decisions:end -->"


def table(k: int) -> str:
    lines = [f"Margin {MARGIN}, intervals at 95%, {k:,} simulated comparisons per row "
             f"(Monte Carlo s.e. {100 * mc_se(k):.2f} points at 2.5%); in bold the error each "
             "rule must keep at most 2.5%:", "",
             "| rule | metric | n | changed | GO at the breach | NO-GO at the breach | "
             "inconclusive at the breach | NO-GO, nothing changed | inconclusive, nothing "
             "changed |", "|---|---|---|---|---|---|---|---|---|"]
    for rule in ERRORS:
        for kind in KINDS:
            for n in NS:
                for q in CHANGED:
                    c = cell(kind, rule, n, q, k, seed=7)

                    def pct(key: str, c=c, rule=rule) -> str:
                        text = f"{100 * c[key]:.1f}%"
                        return f"**{text}**" if key in ERRORS[rule] else text

                    lines.append(
                        f"| {rule} | {'pass/fail' if kind == 'binary' else 'graded share'} "
                        f"| {n} | {100 * q:.0f}% | {pct('go_at_breach')} | "
                        f"{pct('no_go_at_breach')} | {pct('inconclusive_at_breach')} | "
                        f"{pct('no_go_at_null')} | {pct('inconclusive_at_null')} |")
    return "\n".join(lines)


def main(args: list[str] | None = None) -> None:
    doc_table_main("python -m tests.benchmarks decisions", args, table, 4000, DOC, BEGIN, END,
                   "row")


if __name__ == "__main__":
    main()
