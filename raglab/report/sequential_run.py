"""The "Sequential run" section of a run's report: how many of the run's cases were run,
why it stopped, and each check of the gate set it settled on (status, where it settled,
its confidence sequence now), read from ``metrics.json``'s ``sequential`` section
(docs/sequential.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raglab.report.format import fmt, section_html, section_markdown

HEADER = ["gate", "on", "slice", "status", "settled", "confidence sequence"]
TITLE = "Sequential run"


def headline(section: Mapping[str, Any]) -> str:
    """"sequential: 100 of 300 cases run (every check settled; gate set default, seed
    0, batches of 20)"."""
    return (f"sequential: {fmt(section.get('cases_run'))} of {fmt(section.get('cases_total'))}"
            f" cases run ({section.get('stopped_because', 'n/a')}; gate set "
            f"{section.get('gates', 'n/a')}, seed {section.get('seed')}, batches of "
            f"{section.get('batch')})")


def _where(check: Mapping[str, Any]) -> str:
    unit = "paired cases" if check.get("on", "delta") == "delta" else "cases"
    if check.get("settled_at") is not None:
        return f"after {fmt(check['settled_at'])} of {fmt(check.get('n'))} {unit}"
    return f"open after {fmt(check.get('n'))} {unit}"


def rows(section: Mapping[str, Any]) -> list[list[str]]:
    """One row per check."""
    out = []
    for c in section.get("checks") or []:
        where = c.get("slice")
        on = "candidate's mean" if c.get("on") == "mean" else "change"
        out.append([str(c.get("gate")), on,
                    "all" if not where else f"{where.get('key')}={where.get('value')}",
                    str(c.get("status")), _where(c),
                    f"({fmt(c.get('cs_low'))}, {fmt(c.get('cs_high'))})"])
    return out


NOTE = ("The run took its cases in a seeded order, a batch at a time, and stopped when "
        "every check was settled or every case was run; each check reads an anytime-valid "
        "confidence sequence (valid however the number of cases was chosen). raglab "
        "decide on this run reads the same sequences.")


def markdown(section: Mapping[str, Any] | None, table: Any, escape: Any) -> list[str]:
    if not section:
        return []
    return section_markdown(TITLE, [headline(section), NOTE], HEADER, rows(section), table,
                            escape)


def html(section: Mapping[str, Any] | None, table: Any) -> list[str]:
    if not section:
        return []
    return section_html(TITLE, headline(section), NOTE, HEADER, rows(section), table)
