"""Calibration records, keyed by metric-family version, and the lookup run/compare show
next to each family's version (``lookup(versions, cache_dir)``).

Every ``raglab calibrate`` appends one record to ``<cache_dir>/calibration/records.jsonl``
(and logs the same figures to MLflow, experiment ``raglab-calibration``, tagged with each
family's version). Claim labels calibrate the families whose verdicts are claim
verifications (faithfulness, citations, correctness); nugget labels calibrate nuggets.
Since a family's version hashes the grader's model, prompts and settings, changing one word
of a prompt gives a new version, which no record names: "uncalibrated" until re-checked.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from raglab.data.io import read_jsonl_tolerant

# CALIBRATED_BY: family -> the calibration section whose labels measure its judgments
# (derived from the metric declarations: the families judged on claims or on nuggets)
from raglab.metrics.catalog import CALIBRATED_BY, FAMILIES, GRADED_FAMILIES

#: families computed by rules, not judged by a grader (and the diagnosis): nothing to calibrate
NOT_GRADED = (*(f for f in FAMILIES if f not in GRADED_FAMILIES), "diagnosis")
EXPERIMENT = "raglab-calibration"


def records_path(cache_dir: str | Path) -> Path:
    return Path(cache_dir).expanduser().resolve() / "calibration" / "records.jsonl"


def append_record(cache_dir: str | Path, record: dict[str, Any]) -> Path:
    path = records_path(cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.write(line)
        fh.flush()
    return path


def read_records(cache_dir: str | Path) -> list[dict[str, Any]]:
    return read_jsonl_tolerant(records_path(cache_dir))


def record_of(doc: dict[str, Any], run_dir: str, mlflow_run_id: str | None) -> dict[str, Any]:
    """The stored record of a calibration (calibration.json without its items)."""
    def brief(s: dict[str, Any]) -> dict[str, Any]:
        out = {k: s[k] for k in ("n", "kappa", "ci_low", "ci_high")}
        out["leniency"] = s["leniency"]["value"]
        if "weighted_kappa" in s:
            out["weighted_kappa"] = s["weighted_kappa"]
        return out

    return {"created": doc["created"], "grader": doc["grader"], "versions": doc["versions"],
            "repeats": doc["repeats"], "labels": doc["labels"],
            "claims": brief(doc["claims"]), "nuggets": brief(doc["nuggets"]),
            "self_consistency": {k: v for k, v in doc["self_consistency"].items()},
            "run_dir": run_dir, "mlflow_run_id": mlflow_run_id}


def _text(rec: dict[str, Any], section: str) -> str:
    s = rec[section]
    if s.get("kappa") is None:
        return f"kappa n/a ({s['n']} {section[:-1]} labels)"
    return (f"kappa {s['kappa']:.2f} [{s['ci_low']:.2f}, {s['ci_high']:.2f}] "
            f"({s['n']} {section[:-1]} labels)")


def lookup(versions: dict[str, str], cache_dir: str | Path | None = None,
           tracked: Callable[[dict[str, str], dict[str, str]], dict[str, Any]] | None = None
           ) -> dict[str, str]:
    """``{family: text}`` for every family of ``versions``: the latest calibration of that
    family's version ("kappa 0.41 [0.31, 0.52] (157 claim labels)"), "uncalibrated", or
    "not graded" (retrieval, diagnosis). Looks in ``cache_dir`` first; then, for families still
    uncalibrated, asks ``tracked(missing versions, CALIBRATED_BY)`` (the tracking store's
    records: :func:`tracked_lookup` makes one for an MLflow URI)."""
    found: dict[str, dict[str, Any]] = {}
    if cache_dir is not None:
        for rec in read_records(cache_dir):  # later records win
            for fam in CALIBRATED_BY:
                if fam in versions and (rec.get("versions") or {}).get(fam) == versions[fam]:
                    found[fam] = rec
    missing = {f: v for f, v in versions.items() if f in CALIBRATED_BY and f not in found}
    if missing and tracked is not None:
        try:
            found.update(tracked(missing, CALIBRATED_BY))
        except Exception:  # noqa: BLE001 - an unreachable store must not fail a summary
            pass
    out: dict[str, str] = {}
    for fam in versions:
        if fam in NOT_GRADED:
            out[fam] = "not graded"
        elif fam in found:
            out[fam] = _text(found[fam], CALIBRATED_BY[fam])
        else:
            out[fam] = "uncalibrated"
    return out


def versions_table(records: list[dict[str, Any]]) -> str:
    """``raglab calibrate --versions``: one row per grader version and labels file (the
    latest record of each), side by side."""
    latest: dict[tuple, dict[str, Any]] = {}
    for rec in records:
        v = rec.get("versions") or {}
        key = (rec.get("grader"), v.get("faithfulness"), v.get("nuggets"),
               (rec.get("labels") or {}).get("sha256"))
        latest[key] = rec
    if not latest:
        return "no calibration records"
    head = ("created", "grader", "faithfulness", "claims kappa [95% CI]", "leniency",
            "nuggets", "nuggets kappa [95% CI]", "weighted", "leniency", "labels", "repeats")
    rows = [head]

    def k(s: dict[str, Any]) -> str:
        if s.get("kappa") is None:
            return "n/a"
        return f"{s['kappa']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]"

    def num(x: Any) -> str:
        if isinstance(x, dict):
            x = x.get("value")
        return "n/a" if x is None else f"{x:.3f}"

    for rec in sorted(latest.values(), key=lambda r: r.get("created", "")):
        v, lab = rec["versions"], rec["labels"]
        rows.append((rec["created"][:19], rec["grader"], v.get("faithfulness", "?"),
                     k(rec["claims"]), num(rec["claims"].get("leniency")),
                     v.get("nuggets", "?"), k(rec["nuggets"]),
                     num(rec["nuggets"].get("weighted_kappa")),
                     num(rec["nuggets"].get("leniency")),
                     f"{Path(lab['path']).name}@{lab['sha256'][:8]} ({lab['n']})",
                     str(rec.get("repeats", 1))))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in rows)


def version_lines(baseline: dict[str, str], candidate: dict[str, str],
                  cache_dir: str | Path | None, tracked: Any = None) -> list[str]:
    """Terminal lines of a comparison: each family's version(s) and their calibration."""
    fams = list(dict.fromkeys([*candidate, *baseline]))
    if not fams:
        return []
    tb = lookup(baseline, cache_dir, tracked)
    tc = lookup(candidate, cache_dir, tracked) if candidate != baseline else tb
    w = max(len(f) for f in fams)
    out = ["  metric versions (calibration):"]
    for f in fams:
        vb, vc = baseline.get(f, "n/a"), candidate.get(f, "n/a")
        if vb == vc:
            out.append(f"    {f.ljust(w)}  {vc}  {tc.get(f, 'uncalibrated')}")
        else:
            out.append(f"    {f.ljust(w)}  baseline {vb} {tb.get(f, 'uncalibrated')}; "
                       f"candidate {vc} {tc.get(f, 'uncalibrated')}")
    return out
