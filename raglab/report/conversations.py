"""The "Conversations" section of a run's report, read from ``metrics.json``'s
``conversations`` section (raglab.metrics.conversation); nothing for a run without
conversations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raglab.report.format import fmt, section_html, section_markdown

TITLE = "Conversations"
HEADER = ["figure", "value"]


def note(section: Mapping[str, Any]) -> str:
    left = section.get("n_incomplete") or 0
    return (f"{section.get('n')} conversation(s), history {section.get('history')}. A turn "
            "passes when it has no diagnosis (see Failure attribution); every per-turn "
            "metric is in the slices turn and turn_kind. n/a: does not apply (not 0)."
            + (f" {left} conversation(s) with a quarantined turn before any failing one "
               "are left out of the shares of conversations (that turn might have failed)."
               if left else ""))


def rows(section: Mapping[str, Any]) -> list[list[str]]:
    fu = section.get("follow_up_resolution") or {}
    out = [["all turns correct (share of conversations)",
            fmt(section.get("all_turns_correct"))],
           ["knowledge retention (earlier facts present)",
            fmt(section.get("knowledge_retention"))],
           ["follow-up resolution (follow-up / first-turn evidence recall)",
            fmt(fu.get("ratio"))],
           ["final.evidence_recall of follow-up turns", fmt(fu.get("follow_up_recall"))],
           ["final.evidence_recall of first turns", fmt(fu.get("first_recall"))]]
    for turn, share in (section.get("first_failing_turn") or {}).items():
        what = "no turn failed" if turn == "none" else f"first failing turn {turn}"
        out.append([f"{what} (share of conversations)", fmt(share)])
    return out


def markdown(section: Mapping[str, Any] | None, table: Any, escape: Any) -> list[str]:
    if not section:
        return []
    return section_markdown(TITLE, [note(section)], HEADER, rows(section), table, escape)


def html(section: Mapping[str, Any] | None, table: Any) -> list[str]:
    if not section:
        return []
    return section_html(TITLE, None, note(section), HEADER, rows(section), table, numeric_from=1)
