"""How far a comparison's judges are trusted: whether each run was self-graded, and the
latest calibration of the grader version behind every graded family compared.

A run is self-graded when its grader's model is the system's (``metrics.json``
``self_graded``; docs/graders.md). A family version's latest calibration is found, as
``raglab run`` finds it, in the run's ``cache_dir`` (the records ``raglab calibrate``
appends to ``<cache_dir>/calibration/records.jsonl``), then in the tracking store: the one
an MLflow run was read from, or ``--uri`` (docs/calibration.md).
"""

from __future__ import annotations

from typing import Any

from raglab.calibration.records import latest, short_text
from raglab.metrics.catalog import FAMILIES, GRADED_FAMILIES

ROLES = ("baseline", "candidate")
DEFAULT_CACHE_DIR = ".raglab-cache"


def self_graded(src: Any) -> bool | None:
    """A run's ``self_graded`` (None: a run from before raglab recorded it)."""
    value = (src.metrics or {}).get("self_graded")
    return None if value is None else bool(value)


def self_graded_warnings(baseline: Any, candidate: Any) -> list[str]:
    """One warning per self-graded run of a comparison."""
    return [f"the {role} run is self-graded: its grader's model is the model of the system "
            "it judges (a judge tends to favour its own outputs; docs/graders.md)"
            for role, src in zip(ROLES, (baseline, candidate)) if self_graded(src)]


def compared_families(comp: Any) -> list[str]:
    """The graded families of the metrics compared, in ``metric_versions`` order."""
    have = {m.get("family") for m in (comp.metrics or {}).values()}
    return [f for f in FAMILIES if f in GRADED_FAMILIES and f in have]


def _finder(src: Any, uri: str | None) -> Any:
    where = src.tracking_uri or uri
    if not where:
        return None
    from raglab.tracking.standalone import calibration_finder

    return calibration_finder(where)


def calibrations(comp: Any, uri: str | None = None) -> dict[str, dict[str, Any]]:
    """``{family: {"baseline": entry, "candidate": entry}}`` for every graded family
    compared: the family's ``version`` in that run, ``calibrated`` and, when it is, the
    rest of :func:`raglab.calibration.records.latest`'s entry (kappa, ``ci_low``,
    ``ci_high``, ``n``, ``labels_sha256``, ...). ``uri``: a tracking store to look in for runs that
    were not read from one (``--uri``)."""
    fams = compared_families(comp)
    found: dict[str, dict[str, Any]] = {f: {} for f in fams}
    cache: dict[tuple, dict[str, Any]] = {}
    for role, src in zip(ROLES, (comp.baseline, comp.candidate)):
        versions = {f: v for f, v in ((src.metrics or {}).get("metric_versions") or {}).items()
                    if f in found}
        cache_dir = (src.config or {}).get("cache_dir") or DEFAULT_CACHE_DIR
        key = (tuple(sorted(versions.items())), str(cache_dir), src.tracking_uri or uri)
        if key not in cache:  # both runs of one grader version: looked up once
            cache[key] = latest(versions, cache_dir, _finder(src, uri))
        for fam in fams:
            entry = cache[key].get(fam)
            found[fam][role] = {**entry, "calibrated": True,
                                "dataset_match": dataset_match(entry, src)} \
                if entry is not None else {"version": versions.get(fam), "calibrated": False}
    return found


def dataset_match(entry: dict[str, Any], src: Any) -> str:
    """``same`` when a calibration's labels came from the run's dataset (the same cases
    sha256), ``other`` when from another, ``unknown`` when the calibration does not say
    (made before raglab recorded it) or the run does not."""
    theirs = (entry.get("dataset") or {}).get("cases_sha256")
    ours = ((src.metrics or {}).get("dataset") or {}).get("cases_sha256")
    if not theirs or not ours:
        return "unknown"
    return "same" if theirs == ours else "other"


def provenance_text(entry: dict[str, Any]) -> str:
    """``dataset demo (228 cases, sha256 1a2b3c4d5e6f)`` or ``a dataset not recorded``."""
    d = entry.get("dataset") or {}
    if not d.get("cases_sha256"):
        return "a dataset not recorded"
    return (f"dataset {d.get('name')} ({d.get('n_cases')} cases, sha256 "
            f"{str(d['cases_sha256'])[:12]})")


def provenance_warnings(calibration: dict[str, dict[str, Any]], src: Any) -> list[str]:
    """One warning per family whose candidate calibration came from another dataset (or
    does not say which)."""
    out = []
    ours = ((src.metrics or {}).get("dataset") or {}).get("name") or "?"
    for fam, roles in calibration.items():
        entry = roles.get("candidate") or {}
        match = entry.get("dataset_match")
        if entry.get("calibrated") and match in ("other", "unknown"):
            out.append(f"the {fam} calibration (grader version {entry.get('version')}) was made "
                       f"on labels of {provenance_text(entry)}, "
                       + ("not on the candidate's dataset " if match == "other" else
                          "so it cannot be matched to the candidate's dataset ")
                       + f"{ours}: its kappa says little about this judge here")
    return out


def attach(comp: Any, uri: str | None = None) -> Any:
    """Fill ``comp.calibration`` (:func:`calibrations`) and warn of a calibration made on
    another dataset; returns ``comp``."""
    comp.calibration = calibrations(comp, uri)
    comp.warnings.extend(provenance_warnings(comp.calibration, comp.candidate))
    return comp


def calibration_texts(comp: Any) -> tuple[dict[str, str], dict[str, str]] | None:
    """Each run's ``{family: text}`` for the terminal's version lines, from
    ``comp.calibration`` (None when it was not looked up)."""
    if not getattr(comp, "calibration", None):
        return None
    out: tuple[dict[str, str], dict[str, str]] = ({}, {})
    for j, role in enumerate(ROLES):
        versions = comp.versions.get(role) or {}
        for fam in versions:
            if fam in comp.calibration:
                out[j][fam] = short_text(comp.calibration[fam].get(role))
            elif fam in GRADED_FAMILIES:
                out[j][fam] = "not compared"
            else:
                out[j][fam] = "not graded"
    return out


def calibration_rows(calibration: dict[str, dict[str, Any]],
                     families: list[str] | None = None) -> list[list[Any]]:
    """Table rows ``[family, run, version, kappa [95% CI], labels, labels sha256,
    calibrated]``: one row per family when both runs share its version, else one per run."""
    rows: list[list[Any]] = []
    for fam in families if families is not None else list(calibration):
        roles = calibration.get(fam) or {}
        b, c = roles.get("baseline"), roles.get("candidate")
        same = b == c
        for who, entry in ([("both", c)] if same else [("baseline", b), ("candidate", c)]):
            rows.append([fam, who, *entry_cells(entry)])
    return rows


def entry_cells(entry: dict[str, Any] | None) -> list[str]:
    """``[version, kappa [95% CI], labels, labels sha256, calibrated]`` of one entry."""
    if entry is None or not entry.get("calibrated", True):
        return [str((entry or {}).get("version") or ""), "uncalibrated", "", "", ""]
    k = entry.get("kappa")
    lo, hi = entry.get("ci_low"), entry.get("ci_high")
    kappa = "n/a" if k is None else (f"{k:.3f}" if lo is None or hi is None
                                     else f"{k:.3f} [{lo:.3f}, {hi:.3f}]")
    return [str(entry.get("version") or ""), kappa,
            f"{entry.get('n')} {entry.get('labels_kind')}",
            str(entry.get("labels_sha256") or "n/a"), str(entry.get("created") or "")]
