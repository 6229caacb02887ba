"""The judge's checks of a decision: one ``min_kappa`` check per family a gate set names
(:func:`calibration_checks`), and the decision record's judges section (:func:`judge_lines`:
each run's self-grading, each gated family's calibration). Pure functions of a gate set,
gate results and the calibrations :mod:`raglab.compare.trust` looked up.

A family's check, from the latest calibration of the candidate's grader version of that
family: ``n/a`` when no gate of the set reads one of its metrics or none of those gates
applied; ``fail`` when the version is uncalibrated, calibrated on another dataset's labels
(unless ``calibration_from: any``), or the one-sided 95% lower confidence bound of its
kappa is below the minimum (the reason names the family, its kappa and the bound); else
``pass``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from raglab.compare.gates import FAIL, NA, PASS, GateSet
from raglab.compare.trust import entry_cells
from raglab.metrics.catalog import GRADED_FAMILIES, family_of
from raglab.report.summary import md_table

MIN_KAPPA = "min_kappa"
_ROW_VALUES = ("baseline", "candidate", "delta", "ci_low", "ci_high", "p_value", "p_adjusted",
               "n")


def kappa_text(entry: Mapping[str, Any] | None) -> str:
    """``kappa 0.412 [0.310, 0.520] (157 claim labels, sha256 1a2b3c4d5e6f)`` or
    ``uncalibrated``."""
    if not entry or not entry.get("calibrated", True):
        return "uncalibrated"
    k, lo, hi = entry.get("kappa"), entry.get("ci_low"), entry.get("ci_high")
    what = (f"({entry.get('n')} {entry.get('labels_kind')} labels, sha256 "
            f"{str(entry.get('labels_sha256') or 'n/a')[:12]})")
    if k is None:
        return f"kappa n/a {what}"
    ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else ""
    return f"kappa {k:.3f}{ci} {what}"


def calibration_checks(gates: GateSet, results: Sequence[Mapping[str, Any]],
                       calibration: Mapping[str, Mapping[str, Any]],
                       versions: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """One check per family of ``gates.min_kappa`` (module docstring). ``results``: the gate
    checks (:func:`evaluate_gates`); ``calibration``: ``{family: {"candidate": entry}}``
    (:func:`raglab.compare.trust.calibrations`); ``versions``: the candidate's metric
    versions (for a family no calibration was looked up for)."""
    read = {family_of(g.metric) for g in gates.gates}
    applied = {family_of(r["metric"]) for r in results
               if r.get("metric") and r["status"] != NA}
    out = []
    for fam, least in gates.min_kappa.items():
        entry = (calibration.get(fam) or {}).get("candidate") or \
            {"version": (versions or {}).get(fam), "calibrated": False}
        version = entry.get("version")
        kappa = entry.get("kappa") if entry.get("calibrated", True) else None
        lcb = entry.get("kappa_lcb") if entry.get("calibrated", True) else None
        foreign = entry.get("calibrated", True) and entry.get("dataset_match") in (
            "other", "unknown") and gates.calibration_from != "any"
        if fam not in read:
            status, reason = NA, f"no gate of this set reads a {fam} metric"
        elif fam not in applied:
            status, reason = NA, f"no {fam} gate applied"
        elif not entry.get("calibrated", True):
            status, reason = FAIL, (f"{fam}: grader version {version} is uncalibrated "
                                    "(run raglab calibrate with this grader)")
        elif foreign:
            from raglab.compare.trust import provenance_text

            status, reason = FAIL, (
                f"{fam}: grader version {version} was calibrated on labels of "
                f"{provenance_text(entry)}, not of the candidate's dataset: treated as "
                "uncalibrated (calibrate on this dataset's labels, or allow it with "
                "calibration_from: any)")
        elif kappa is None:
            status, reason = FAIL, f"{fam}: {kappa_text(entry)}, below {least:g}"
        elif lcb is None:
            status, reason = FAIL, (f"{fam}: {kappa_text(entry)} has no one-sided lower "
                                    "bound (a calibration from before raglab recorded it: "
                                    "run raglab calibrate again)")
        elif lcb < least:
            status, reason = FAIL, (f"{fam}: {kappa_text(entry)}, one-sided 95% lower bound "
                                    f"{lcb:.3f} < {least:g}")
        else:
            status, reason = PASS, (f"{fam}: {kappa_text(entry)}, one-sided 95% lower bound "
                                    f"{lcb:.3f} >= {least:g}")
        out.append({"gate": f"{fam} judge kappa", "index": None, "metric": None,
                    "family": fam, "rule": MIN_KAPPA, "slice": None,
                    "requirement": f"kappa's one-sided 95% lower confidence bound >= {least:g}",
                    **dict.fromkeys(_ROW_VALUES), "version": version, "kappa": kappa,
                    "kappa_lcb": lcb, "dataset_match": entry.get("dataset_match"),
                    "status": status, "reason": reason})
    return out


def gated_families(gates: GateSet) -> list[str]:
    """The graded families a gate of the set reads, in gate order."""
    fams = [family_of(g.metric) for g in gates.gates]
    return [f for f in dict.fromkeys(fams) if f in GRADED_FAMILIES]


def _yes_no(value: Any) -> str:
    return "not recorded" if value is None else ("YES" if value else "no")


def judge_lines(rec: Mapping[str, Any]) -> list[str]:
    """The decision record's judges: self-grading, and each gated family's calibration."""
    sg = rec.get("self_graded") or {}
    lines = ["## Judges", ""]
    lines += md_table(["", "baseline", "candidate"],
                    [["self-graded (grader's model is the system's)",
                      _yes_no(sg.get("baseline")), _yes_no(sg.get("candidate"))]])
    cal = rec.get("calibration") or {}
    if not cal:
        return lines + ["", "(no gate reads a graded family)"]
    least = ((rec.get("gates") or {}).get("set") or {}).get("min_kappa") or {}
    checks = {r.get("family"): r for r in rec["results"] if r.get("rule") == MIN_KAPPA}
    rows = []
    for fam, roles in cal.items():
        c, b = roles.get("candidate") or {}, roles.get("baseline") or {}
        check = checks.get(fam)
        rows.append([fam, *entry_cells(c),
                     (b.get("version") or "n/a") if b.get("version") != c.get("version")
                     else "same", f"{least[fam]:g}" if fam in least else "-",
                     check["status"].upper() if check else "-"])
    lines += ["", "Latest calibration (`raglab calibrate`) of the candidate's grader version "
              "of each gated family:", ""]
    lines += md_table(["family", "version", "kappa [95% CI]", "labels", "labels sha256",
                       "calibrated", "baseline version", "min kappa", "result"], rows)
    return lines
