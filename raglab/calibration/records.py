"""Calibration records, keyed by metric-family version, and the lookup run/compare show
next to each family's version (``lookup(versions, cache_dir)``).

Every ``raglab calibrate`` appends one record to ``<cache_dir>/calibration/records.jsonl``
(and logs the same figures to MLflow, experiment ``raglab-calibration``, tagged with each
family's version and the labels' sha256). :func:`latest` finds the latest calibration of
each family version (what ``raglab compare`` shows and ``raglab decide`` gates on with a
gate set's ``min_kappa``), :func:`lookup` says it in words. Claim labels calibrate the
families whose verdicts are claim verifications (faithfulness, citations, correctness);
nugget labels calibrate nuggets.
Since a family's version hashes the grader's model, prompts and settings, changing one word
of a prompt gives a new version, which no record names: "uncalibrated" until re-checked.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from raglab.data.io import check_writable_output, first_problem
from raglab.errors import UserError

# CALIBRATED_BY: family -> the calibration section whose labels measure its judgments
# (derived from the metric declarations: the families judged on claims or on nuggets)
from raglab.metrics.catalog import CALIBRATED_BY, FAMILIES, GRADED_FAMILIES

#: families computed by rules, not judged by a grader (and the diagnosis): nothing to calibrate
NOT_GRADED = (*(f for f in FAMILIES if f not in GRADED_FAMILIES), "diagnosis")
EXPERIMENT = "raglab-calibration"


def records_path(cache_dir: str | Path) -> Path:
    return Path(cache_dir).expanduser().resolve() / "calibration" / "records.jsonl"


def append_record(cache_dir: str | Path, record: dict[str, Any]) -> Path:
    path = check_writable_output(records_path(cache_dir))
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.write(line)
        fh.flush()
    return path


Kappa = Annotated[float, Field(ge=-1, le=1, allow_inf_nan=False, strict=True)]
Number = Annotated[float, Field(allow_inf_nan=False, strict=True)]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class WeightedKappa(_Open):
    value: Kappa | None = None
    ci_low: Kappa | None = None
    ci_high: Kappa | None = None


class Agreement(_Open):
    """One labels kind's figures (``claims`` or ``nuggets``)."""

    n: Annotated[int, Field(ge=0, strict=True)] | None = None
    kappa: Kappa | None = None
    ci_low: Kappa | None = None
    ci_high: Kappa | None = None
    #: the one-sided 95% lower confidence bound of kappa (min_kappa compares it)
    kappa_lcb: Kappa | None = None
    leniency: Number | None = None
    weighted_kappa: WeightedKappa | Kappa | None = None


class Labels(_Open):
    path: Annotated[str, Field(strict=True)] | None = None
    sha256: Annotated[str, Field(strict=True)] | None = None
    n: Annotated[int, Field(ge=0, strict=True)] | None = None


class Provenance(_Open):
    """The dataset the labels came from: its config name, case count and cases sha256."""

    name: Annotated[str, Field(strict=True)] | None = None
    n_cases: Annotated[int, Field(ge=0, strict=True)] | None = None
    cases_sha256: Annotated[str, Field(strict=True)] | None = None


class CalibrationRecord(_Open):
    """A line of ``records.jsonl`` (:func:`record_of`), checked as it is read: a
    hand-edited kappa of 7.5, NaN or "0.9" must not reach a decision's ``min_kappa``."""

    created: Annotated[str, Field(strict=True)] | None = None
    grader: Annotated[str, Field(strict=True)] | None = None
    versions: dict[str, Annotated[str, Field(strict=True)]] = Field(default_factory=dict)
    repeats: Annotated[int, Field(ge=1, strict=True)] = 1
    labels: Labels = Field(default_factory=Labels)
    dataset: Provenance | None = None
    claims: Agreement | None = None
    nuggets: Agreement | None = None
    self_consistency: dict[str, Any] = Field(default_factory=dict)
    run_dir: Annotated[str, Field(strict=True)] | None = None
    mlflow_run_id: Annotated[str, Field(strict=True)] | None = None


def read_records(cache_dir: str | Path) -> list[dict[str, Any]]:
    """The records of ``cache_dir``, each checked against :class:`CalibrationRecord` (a
    torn last line, from a kill, is left out); UserError (one line naming the file and the
    line) on the first record that does not pass."""
    path = records_path(cache_dir)
    if not path.exists():
        return []
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError as e:
        raise UserError(f"cannot read calibration records: {e.strerror or e}",
                        file=str(path)) from None
    out: list[dict[str, Any]] = []
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):
            if all(not r.strip() for r in lines[i + 1:]):
                break  # torn last line
            raise UserError("calibration record: corrupt line (not JSON)", file=str(path),
                            line=i + 1) from None
        if not isinstance(obj, dict):
            raise UserError(f"calibration record: expected a JSON object, got "
                            f"{type(obj).__name__}", file=str(path), line=i + 1)
        try:
            rec = CalibrationRecord.model_validate(obj)
        except ValidationError as e:
            p = first_problem(e, CalibrationRecord, obj)
            raise UserError(f"calibration record: field '{p.loc}': {p.msg}" if p.loc
                            else f"calibration record: {p.msg}", file=str(path),
                            line=i + 1) from None
        out.append(rec.model_dump())
    return out


def record_of(doc: dict[str, Any], run_dir: str, mlflow_run_id: str | None) -> dict[str, Any]:
    """The stored record of a calibration (calibration.json without its items)."""
    def brief(s: dict[str, Any]) -> dict[str, Any]:
        out = {k: s.get(k) for k in ("n", "kappa", "ci_low", "ci_high", "kappa_lcb")}
        out["leniency"] = s["leniency"]["value"]
        if "weighted_kappa" in s:
            out["weighted_kappa"] = s["weighted_kappa"]
        return out

    return {"created": doc["created"], "grader": doc["grader"], "versions": doc["versions"],
            "repeats": doc["repeats"], "labels": doc["labels"], "dataset": doc.get("dataset"),
            "claims": brief(doc["claims"]), "nuggets": brief(doc["nuggets"]),
            "self_consistency": {k: v for k, v in doc["self_consistency"].items()},
            "run_dir": run_dir, "mlflow_run_id": mlflow_run_id}


def _entry(rec: dict[str, Any], family: str, version: str) -> dict[str, Any]:
    """What a comparison or a decision shows of a record, for one family's version."""
    section = CALIBRATED_BY[family]
    s = rec.get(section) or {}
    labels = rec.get("labels") or {}
    return {"version": version, "labels_kind": section[:-1], "kappa": s.get("kappa"),
            "ci_low": s.get("ci_low"), "ci_high": s.get("ci_high"), "n": s.get("n"),
            "kappa_lcb": s.get("kappa_lcb"), "dataset": rec.get("dataset"),
            "labels": labels.get("path"), "labels_sha256": labels.get("sha256"),
            "created": rec.get("created"), "grader": rec.get("grader"),
            "run_dir": rec.get("run_dir"), "mlflow_run_id": rec.get("mlflow_run_id")}


def latest(versions: dict[str, str], cache_dir: str | Path | None = None,
           tracked: Callable[[dict[str, str], dict[str, str]], dict[str, Any]] | None = None
           ) -> dict[str, dict[str, Any] | None]:
    """``{family: calibration or None}`` for every graded family of ``versions``: the
    latest calibration of that family's version (:func:`_entry`: kappa, its interval, the
    number and sha256 of the labels, when and where), None when it has none (relevance and
    abstention have no labels kind: always None). Looks in ``cache_dir``'s records first
    (the last record of a version wins); then, for versions still uncalibrated, asks
    ``tracked(missing versions, CALIBRATED_BY)`` (the tracking store's records:
    :func:`raglab.tracking.standalone.calibration_finder` makes one for an MLflow URI; an
    unreachable store finds nothing)."""
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
    return {fam: _entry(found[fam], fam, versions[fam]) if fam in found else None
            for fam in versions if fam not in NOT_GRADED}


def short_text(entry: dict[str, Any] | None) -> str:
    """``kappa 0.41 [0.31, 0.52] (157 claim labels)``, or ``uncalibrated``."""
    if entry is None or entry.get("calibrated") is False:
        return "uncalibrated"
    what = f"({entry['n']} {entry['labels_kind']} labels)"
    if entry.get("kappa") is None:
        return f"kappa n/a {what}"
    if entry.get("ci_low") is None or entry.get("ci_high") is None:
        return f"kappa {entry['kappa']:.2f} {what}"
    return f"kappa {entry['kappa']:.2f} [{entry['ci_low']:.2f}, {entry['ci_high']:.2f}] {what}"


def lookup(versions: dict[str, str], cache_dir: str | Path | None = None,
           tracked: Callable[[dict[str, str], dict[str, str]], dict[str, Any]] | None = None
           ) -> dict[str, str]:
    """``{family: text}`` for every family of ``versions``: the latest calibration of that
    family's version ("kappa 0.41 [0.31, 0.52] (157 claim labels)", :func:`latest`),
    "uncalibrated", or "not graded" (retrieval, diagnosis)."""
    entries = latest(versions, cache_dir, tracked)
    return {fam: short_text(entries[fam]) if fam in entries else "not graded"
            for fam in versions}


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
                  cache_dir: str | Path | None, tracked: Any = None,
                  texts: tuple[dict[str, str], dict[str, str]] | None = None) -> list[str]:
    """Terminal lines of a comparison: each family's version(s) and their calibration
    (``texts``: each run's :func:`lookup`, when the caller has them)."""
    fams = list(dict.fromkeys([*candidate, *baseline]))
    if not fams:
        return []
    if texts is not None:
        tb, tc = texts
    else:
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
