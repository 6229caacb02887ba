"""A study folder's decision records: a free file name for a new record (a second decision
of the same study, day and gate set never replaces the first) and the study's index,
``decisions.md``, listing every record in the order they were written."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

INDEX = "decisions.md"
_SUFFIXES = (".json", ".md", ".html")
_NAME = re.compile(r"^decision-(\d{4}-\d{2}-\d{2})-(.+)\.json$")


def free_stem(study: Path, date: str, name: str) -> str:
    """``decision-DATE-NAME``, or ``decision-DATE-NAME-N`` with the lowest N >= 2 whose
    files do not exist yet (none of ``.json``, ``.md``, ``.html``)."""
    base = f"decision-{date}-{name}"
    stem, n = base, 1
    while any((study / f"{stem}{s}").exists() for s in _SUFFIXES):
        n += 1
        stem = f"{base}-{n}"
    return stem


def _entry(path: Path) -> dict[str, Any] | None:
    m = _NAME.match(path.name)
    if m is None:
        return None
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        rec = None
    if not isinstance(rec, dict):
        return {"stem": path.stem, "date": m.group(1), "written": None, "decision": "?",
                "gates": "?", "question": None, "unreadable": True}
    g = rec.get("gates")
    gates: dict[str, Any] = g if isinstance(g, dict) else {}
    return {"stem": path.stem, "date": str(rec.get("date") or m.group(1)),
            "written": rec.get("written_at"), "decision": str(rec.get("decision", "?")),
            "gates": str(gates.get("name", "?")), "question": rec.get("question"),
            "baseline": (rec.get("baseline") or {}).get("label"),
            "candidate": (rec.get("candidate") or {}).get("label"), "unreadable": False}


def _seq(stem: str, date: str) -> int:
    m = re.search(r"-(\d+)$", stem)
    return int(m.group(1)) if m else 1


def records(study: Path) -> list[dict[str, Any]]:
    """Every ``decision-*.json`` of the study, oldest first (by date, then the time it was
    written, then its sequence number)."""
    found = [e for p in sorted(study.glob("decision-*.json")) if (e := _entry(p))]
    return sorted(found, key=lambda e: (e["date"], e["written"] or "",
                                        _seq(e["stem"], e["date"]), e["stem"]))


def index_text(study: Path) -> str:
    from raglab.text.escape import md

    lines = ["# Decisions", "",
             "Every decision record of this study, oldest first (written by `raglab decide`; "
             "a record is never replaced: a second decision of a day and gate set gets a "
             "number).", "",
             "| # | date | written (UTC) | decision | gate set | baseline → candidate | "
             "record |", "|---|---|---|---|---|---|---|"]
    for i, e in enumerate(records(study), 1):
        if e["unreadable"]:
            lines.append(f"| {i} | {e['date']} | | (unreadable) | | | {e['stem']}.json |")
            continue
        runs = f"{md(e['baseline'] or '?')} → {md(e['candidate'] or '?')}"
        lines.append(f"| {i} | {e['date']} | {md(e['written'] or '')} | {md(e['decision'])} "
                     f"| {md(e['gates'])} | {runs} | [{e['stem']}.md]({e['stem']}.md) |")
    return "\n".join(lines) + "\n"
