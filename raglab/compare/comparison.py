"""Paired comparison of a candidate run with a baseline run (``raglab compare``).

A pipeline: both runs are read once into a :class:`~raglab.compare.table.PairedTable`
(cases aligned on ids, metrics, weights, clusters, slices); every metric is compared overall
and per slice (every tag key, plus ``answerable``) with :func:`raglab.stats.paired_table`
as pure functions of that table; the p-values are adjusted in two families (the headline
metrics overall, confirmatory; everything else, exploratory); the result is one
:class:`Comparison`, which the renderers (``render``, ``render_html``, ``sweep_render``,
the MLflow logging and ``decide``) only read.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from raglab.compare.config import CompareCfg
from raglab.compare.flips import NOT_RECORDED, PASSED, diagnosis_counts, flipped_cases, passes
from raglab.compare.load import RunSource, load_run
from raglab.compare.table import (
    PairedTable,
    VersionMismatch,
    clustering,
    pair_runs,
    untagged_clusters,
)
from raglab.compare.trust import self_graded
from raglab.metrics.catalog import HEADLINE

__all__ = ["RunSource", "load_run", "VersionMismatch", "Comparison", "compare_runs",
           "CompareCfg", "ROW_KEYS", "NOT_RECORDED", "PASSED", "passes"]

ROW_KEYS = ("metric", "slice", "baseline", "candidate", "delta", "ci_low", "ci_high",
            "p_value", "p_adjusted", "n", "wins", "ties", "losses", "comparable", "family",
            "exploratory", "aliases", "mde", "weighted")
CONFIRMATORY, EXPLORATORY = "confirmatory", "exploratory"


@dataclass
class Comparison:
    baseline: RunSource
    candidate: RunSource
    rows: list[dict]                       # compare.json rows (exactly ROW_KEYS)
    flipped: dict
    diagnoses: dict
    versions: dict
    warnings: list[str]
    settings: dict
    row_info: list[dict] = field(default_factory=list)   # parallel to rows: family, kind, ...
    slices: list[dict] = field(default_factory=list)     # [{key, value, n, small}]
    metrics: dict = field(default_factory=dict)          # name -> {family, direction, kind}
    grader_noise: dict = field(default_factory=dict)     # metric -> noise of its delta
    #: (output folder, project folder): local paths in the outputs relative to the folder,
    #: only inside the project (raglab.compare.paths); None: as given
    paths: tuple | None = None
    #: family -> {baseline, candidate}: its grader version's latest calibration (compare.trust)
    calibration: dict = field(default_factory=dict)
    #: the prediction-powered differences of labelled metrics (raglab.compare.human), or None
    ppi: dict | None = None
    _index: dict | None = field(default=None, repr=False)
    table: PairedTable | None = field(default=None, repr=False)   # the paired data

    def one_sided(self, tests: list[tuple[str, tuple[str, str] | None, float, str]]
                  ) -> list[float | None]:
        """One-sided p-values of ``(metric, slice, theta, side)`` tests on this comparison's
        paired cases (``side``: ``less`` tests ``delta < theta``, ``greater`` ``delta >
        theta``), each the test whose inversion is the metric's interval, with the
        comparison's seed, resamples, weights and clusters; None where the metric or slice
        is not in the comparison or no case is paired."""
        from raglab.stats.threads import blas_threads

        with blas_threads():
            return self._one_sided(tests)

    def _one_sided(self, tests) -> list[float | None]:
        out: list[float | None] = []
        for metric, slice, theta, side in tests:
            idx = None if self.table is None else self.table.positions(slice)
            if self.table is None or idx is None or metric not in self.table.names:
                out.append(None)
                continue
            out.append(self.table.one_sided(idx, metric, theta, side))
        return out

    def basis(self, metric: str, slice: tuple[str, str] | None):
        """What the interval of ``metric`` in ``slice`` was made of
        (:class:`raglab.stats.settle.Basis`), for the cases that would settle a check on
        it; None without a paired case or an interval."""
        from raglab.stats.settle import Basis

        row, info = self.row(metric, slice), self.info(metric, slice)
        if row is None or info is None or not row["n"] or row["delta"] is None \
                or row["ci_low"] is None or row["ci_high"] is None:
            return None
        score = moments = None
        idx = None if self.table is None else self.table.positions(slice)
        if info["ci_method"] in ("score", "score-bound") and idx is not None:
            assert self.table is not None
            score, moments = self.table.score_basis(idx, metric,
                                                    info["ci_method"] == "score-bound")
        return Basis(int(row["n"]), float(row["delta"]), float(row["ci_low"]),
                     float(row["ci_high"]), float(self.settings["confidence"]), score,
                     moments)

    def _position(self, metric: str, slice: tuple[str, str] | None) -> int | None:
        if self._index is None:
            self._index = {(r["metric"], None if r["slice"] is None else
                            (r["slice"]["key"], r["slice"]["value"])): i
                           for i, r in enumerate(self.rows)}
        return self._index.get((metric, None if slice is None else tuple(slice)))

    def row(self, metric: str, slice: tuple[str, str] | None = None) -> dict | None:
        """The row of ``metric`` overall (``slice`` None) or in slice ``(key, value)``."""
        i = self._position(metric, slice)
        return None if i is None else self.rows[i]

    def info(self, metric: str, slice: tuple[str, str] | None = None) -> dict | None:
        """That row's extra facts: family, direction, kind, small, slice_n, test,
        ci_method, significant (after adjustment)."""
        i = self._position(metric, slice)
        return None if i is None else self.row_info[i]

    def to_json(self) -> dict:
        def run(src: RunSource) -> dict:
            from raglab.compare.paths import shown

            local = src.mlflow_run_id is None
            return {"label": src.label,
                    "ref": shown(src.ref, self.paths) if local else src.ref,
                    "run_dir": shown(str(src.run_dir), self.paths) if local else None,
                    "mlflow_run_id": src.mlflow_run_id, "n_records": len(src.by_id()),
                    "self_graded": self_graded(src)}

        return {"baseline": run(self.baseline), "candidate": run(self.candidate),
                "settings": self.settings, "warnings": self.warnings,
                "versions": self.versions, "metrics": self.metrics, "slices": self.slices,
                "rows": self.rows, "flipped": self.flipped, "diagnoses": self.diagnoses,
                "grader_noise": self.grader_noise, "calibration": self.calibration,
                "ppi": self.ppi}


# ---- the comparison -------------------------------------------------------------------------
def _num(x) -> float | None:
    return None if x is None else float(x)


def compare_runs(baseline: RunSource, candidate: RunSource, cfg: CompareCfg, *,
                 allow_case_mismatch: bool = False, allow_version_mismatch: bool = False,
                 allow_incomplete: bool = False) -> Comparison:
    """Compare ``candidate`` with ``baseline``. UserError on an incomplete run or different
    case sets, VersionMismatch on different metric versions (unless allowed)."""
    import numpy as np

    t = pair_runs(baseline, candidate, cfg, allow_case_mismatch=allow_case_mismatch,
                  allow_version_mismatch=allow_version_mismatch,
                  allow_incomplete=allow_incomplete)
    ids, names, metrics, B, C = t.ids, t.names, t.metrics, t.B, t.C
    weights, clusters, groups, bad = t.weights, t.clusters, t.groups, t.mismatched
    rows: list[dict[str, Any]] = []
    info: list[dict[str, Any]] = []
    slices: list[dict[str, Any]] = []
    from raglab.stats.threads import blas_threads

    with blas_threads():
        tables = [t.stats(idx) for _, idx in groups]
    same: dict[bytes, list[int]] = defaultdict(list)     # identical per-case values -> rows
    for (key, idx), stats in zip(groups, tables):
        b, c = B[idx], C[idx]
        w = None if weights is None else weights[idx]
        both = ~np.isnan(b) & ~np.isnan(c)
        if w is not None:
            both &= (w > 0)[:, None]
        ww = np.where(both, 1.0 if w is None else w[:, None], 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            cnt = both.sum(axis=0)
            tw = ww.sum(axis=0)
            mb = (np.where(both, b, 0.0) * ww).sum(axis=0) / np.maximum(tw, 1e-300)
            mc = (np.where(both, c, 0.0) * ww).sum(axis=0) / np.maximum(tw, 1e-300)
        small = key is not None and len(idx) < cfg.min_slice_n
        if key is not None:
            slices.append({"key": key[0], "value": key[1], "n": int(len(idx)), "small": small})
        for j, (name, st) in enumerate(zip(names, stats)):
            fam = metrics[name]["family"]
            comparable = fam not in bad
            confirmatory = key is None and name in HEADLINE
            if st.n and st.wins + st.losses:     # rows without a test have no aliases
                fp = _fingerprint(idx[both[:, j]], b[both[:, j], j], c[both[:, j], j],
                                  None if w is None else w[both[:, j]])
            else:
                fp = len(rows).to_bytes(8, "little") + b"untested"
            same[fp].append(len(rows))
            rows.append({
                "metric": name,
                "slice": None if key is None else {"key": key[0], "value": key[1]},
                "baseline": float(mb[j]) if cnt[j] else None,
                "candidate": float(mc[j]) if cnt[j] else None,
                "delta": _num(st.delta), "ci_low": _num(st.ci_low), "ci_high": _num(st.ci_high),
                "p_value": _num(st.p_value), "p_adjusted": None, "n": int(st.n),
                "wins": int(st.wins), "ties": int(st.ties), "losses": int(st.losses),
                "comparable": comparable,
                "family": CONFIRMATORY if confirmatory else EXPLORATORY,
                "exploratory": not confirmatory, "aliases": [], "mde": _num(st.mde),
                "weighted": weights is not None})
            info.append({"family": fam, "direction": metrics[name]["direction"],
                         "kind": metrics[name]["kind"], "small": small,
                         "slice_n": int(len(idx)), "test": st.test, "ci_method": st.ci_method,
                         "significant": False, "n_eff": st.n_eff, "units": st.units})
    sizes = _adjust(rows, info, same, cfg)
    settings = {"confidence": cfg.confidence, "n_bootstrap": cfg.n_bootstrap, "seed": cfg.seed,
                "interval": cfg.interval, "adjust": cfg.adjust,
                "adjust_name": ADJUST_NAMES[cfg.adjust],
                "adjust_exploratory": cfg.adjust_exploratory,
                "adjust_exploratory_name": ADJUST_NAMES[cfg.adjust_exploratory],
                "alpha": cfg.alpha, "min_slice_n": cfg.min_slice_n, "n_cases": len(ids),
                "family_size": sizes[CONFIRMATORY], "exploratory_size": sizes[EXPLORATORY],
                "aliased_rows": sum(len(g) - 1 for g in same.values()),
                "cluster": t.cfg.cluster,
                "n_clusters": None if clusters is None else len(set(clusters.tolist())),
                # (of them, cases without the tag: a mixed set's single-turn cases)
                "n_untagged": None if clusters is None else untagged_clusters(clusters.tolist()),
                "weighted": weights is not None,
                "n_eff": None if weights is None else
                float(weights.sum() ** 2 / max((weights ** 2).sum(), 1e-300)),
                "flip_thresholds": dict(cfg.flip_thresholds), "unpaired_metrics": t.unpaired}
    if clusters is not None:  # compare.json and the decision record say it in words
        settings["clustering"] = clustering(t.cfg.cluster, len(set(clusters.tolist())),
                                            untagged_clusters(clusters.tolist()))
    comp = Comparison(baseline, candidate, rows, {}, {}, t.versions, t.warnings, settings,
                      info, slices, metrics, table=t)
    comp.flipped = flipped_cases(baseline, candidate, ids, cfg)
    comp.diagnoses = diagnosis_counts(baseline, candidate, ids)
    from raglab.compare.noise import grader_noise

    comp.grader_noise = grader_noise(baseline, candidate, ids, rows, cfg.confidence)
    from raglab.compare.human import human_scale

    comp.ppi = human_scale(t, round(1.0 - cfg.confidence, 12))
    return comp


ADJUST_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg"}


def _fingerprint(positions, b, c, w) -> bytes:
    """Rows with equal fingerprints hold the same paired values of the same cases."""
    import hashlib

    import numpy as np

    h = hashlib.blake2b(digest_size=16)
    for part in (positions, b, c) if w is None else (positions, b, c, w):
        h.update(np.ascontiguousarray(part).tobytes())
        h.update(b"|")
    return h.digest()


def _adjust(rows: list[dict], info: list[dict], same: dict[bytes, list[int]],
            cfg: CompareCfg) -> dict[str, int]:
    """Each set of rows with identical paired values is tested once: its representative (a
    confirmatory row if one is in the set, else the first) joins its family, the others are
    its aliases and share its adjusted p-value (each keeps its own family label). The
    confirmatory family (headline metrics overall) is adjusted by ``cfg.adjust``, the
    exploratory one (everything else) by ``cfg.adjust_exploratory``. Returns the size of
    each family."""
    from raglab.stats import adjust_pvalues

    members: dict[str, list[int]] = {CONFIRMATORY: [], EXPLORATORY: []}
    alias_of: dict[int, int] = {}
    for group in same.values():
        rep = next((i for i in group if rows[i]["family"] == CONFIRMATORY), group[0])
        for i in group:
            if i != rep:
                alias_of[i] = rep
            rows[i]["aliases"] = [{"metric": rows[k]["metric"], "slice": rows[k]["slice"]}
                                  for k in group if k != i]
        r = rows[rep]
        if not r["comparable"] or r["p_value"] is None:
            continue
        if r["wins"] + r["losses"] == 0:   # every paired difference is zero: cannot reject
            r["p_adjusted"] = 1.0
            continue
        members[r["family"]].append(rep)
    for fam, method in ((CONFIRMATORY, cfg.adjust), (EXPLORATORY, cfg.adjust_exploratory)):
        adjusted = adjust_pvalues([rows[i]["p_value"] for i in members[fam]], method)
        for i, p in zip(members[fam], adjusted):
            rows[i]["p_adjusted"] = p
            info[i]["significant"] = p is not None and p < cfg.alpha
    for i, rep in alias_of.items():   # an alias keeps its own family, shares the test
        if rows[i]["comparable"] and rows[rep]["p_adjusted"] is not None:
            # never below its own raw p (equal paired values give equal p-values, but a
            # row is never shown adjusted below its raw figure)
            own = rows[i]["p_value"]
            adj = rows[rep]["p_adjusted"] if own is None else max(rows[rep]["p_adjusted"], own)
            rows[i]["p_adjusted"] = adj
            info[i]["significant"] = adj < cfg.alpha
    return {fam: len(m) for fam, m in members.items()}


