"""The "Human scale" section of a run's report: each labelled metric's prediction-powered
estimate with its interval beside the judge's plain mean, overall and per slice, read
from ``metrics.json``'s ``ppi`` section (written by ``raglab label``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raglab.report.format import fmt, section_html, section_markdown

HEADER = ["metric", "slice", "judge mean", "human scale (PPI++)", "interval", "labels",
          "effective labels"]
TITLE = "Human scale (prediction-powered estimates)"


def _interval(est: Mapping[str, Any]) -> str:
    return f"[{fmt(est.get('ci_low'))}, {fmt(est.get('ci_high'))}]"


def rows(section: Mapping[str, Any] | None) -> list[list[str]]:
    """One row per labelled metric overall, then one per slice with an estimate."""
    out: list[list[str]] = []
    for metric, entry in sorted(((section or {}).get("metrics") or {}).items()):
        overall = entry.get("overall")
        labels = entry.get("labels") or {}
        if overall is None:
            out.append([metric, "all", "", "n/a", "", fmt(labels.get("usable")),
                        str(entry.get("why") or "")])
            continue
        for where, est in [("all", overall)] + [
                (f"{k}={v}", e) for k, vals in sorted((entry.get("slices") or {}).items())
                for v, e in sorted(vals.items())]:
            out.append([metric, where, fmt(est.get("judge_mean")), fmt(est.get("estimate")),
                        _interval(est), fmt(est.get("n_labelled")),
                        fmt(est.get("n_effective"))])
    return out


def note(section: Mapping[str, Any]) -> str:
    sample = section.get("sample") or {}
    level = int(round(100 * (1 - float(section.get("alpha") or 0.05))))
    by = sample.get("by")
    return (f"{level}% intervals. People labelled a random sample of {sample.get('n_sampled')} "
            f"case(s) (seed {sample.get('seed')}"
            + (f", stratified by {by}" if by else "")
            + "); the estimate corrects the judge's mean over every case by the "
            "labelled cases' difference between people and judge (PPI++, power-tuned); "
            "the interval is the score interval where the labels are on a scale (pass/fail, "
            "yes/partial/no), Hall's otherwise and for a stratified sample. "
            "Effective labels: how many labels alone would give the same interval. Slices "
            f"need {section.get('min_slice_labels')} labels.")


def markdown(section: Mapping[str, Any] | None, table: Any, escape: Any) -> list[str]:
    if not section:
        return []
    return section_markdown(TITLE, [note(section)], HEADER, rows(section), table, escape)


def html(section: Mapping[str, Any] | None, table: Any) -> list[str]:
    if not section:
        return []
    return section_html(TITLE, None, note(section), HEADER, rows(section), table)
