"""Paired comparison of a candidate run with a baseline run (``raglab compare``).

Cases are paired on case ids; every metric is compared overall and per slice (every tag key,
plus ``answerable``) with :func:`raglab.stats.paired_table`, and the p-values of the whole
metric x slice family are adjusted together (Holm by default, Benjamini-Hochberg by option).
Reads the runs' records only (DESIGN rule 1); renders nothing (see ``compare_render``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from raglab.compare.config import CompareCfg
from raglab.compare.load import RunSource, load_run, questions
from raglab.compare.trust import self_graded, self_graded_warnings
from raglab.errors import UserError
from raglab.metrics.aggregate import slice_keys
from raglab.metrics.catalog import HEADLINE, family_of, spec_of

__all__ = ["RunSource", "load_run", "VersionMismatch", "Comparison", "compare_runs",
           "CompareCfg", "ROW_KEYS"]

ROW_KEYS = ("metric", "slice", "baseline", "candidate", "delta", "ci_low", "ci_high",
            "p_value", "p_adjusted", "n", "wins", "ties", "losses", "comparable", "family",
            "exploratory", "aliases", "mde", "weighted")
CONFIRMATORY, EXPLORATORY = "confirmatory", "exploratory"
NOT_RECORDED = "not recorded"
PASSED = "passed"


class VersionMismatch(UserError):
    """Metric versions differ where the comparison needs them equal (the CLI exits 3)."""


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
    #: family -> {baseline, candidate}: its grader version's latest calibration (compare.trust)
    calibration: dict = field(default_factory=dict)
    _index: dict | None = field(default=None, repr=False)
    _design: Any = field(default=None, repr=False)      # the paired data, for further tests
    _groups: dict = field(default_factory=dict, repr=False)   # slice -> case positions

    def one_sided(self, tests: list[tuple[str, tuple[str, str] | None, float, str]]
                  ) -> list[float | None]:
        """One-sided sign-flip p-values of ``(metric, slice, theta, side)`` tests on this
        comparison's paired cases (``side``: ``less`` tests ``delta < theta``, ``greater``
        ``delta > theta``), with its seed, resamples, weights and clusters; None where the
        metric or slice is not in the comparison or no case is paired."""
        from raglab.stats.threads import blas_threads

        with blas_threads():
            return self._one_sided(tests)

    def _one_sided(self, tests) -> list[float | None]:
        out: list[float | None] = []
        for metric, slice, theta, side in tests:
            idx = self._groups.get(None if slice is None else tuple(slice))
            if self._design is None or idx is None or metric not in self._design.names:
                out.append(None)
                continue
            out.append(self._design.one_sided(idx, metric, theta, side))
        return out

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
            return {"label": src.label, "ref": src.ref, "run_dir": str(src.run_dir)
                    if src.mlflow_run_id is None else None,
                    "mlflow_run_id": src.mlflow_run_id, "n_records": len(src.by_id()),
                    "self_graded": self_graded(src)}

        return {"baseline": run(self.baseline), "candidate": run(self.candidate),
                "settings": self.settings, "warnings": self.warnings,
                "versions": self.versions, "metrics": self.metrics, "slices": self.slices,
                "rows": self.rows, "flipped": self.flipped, "diagnoses": self.diagnoses,
                "grader_noise": self.grader_noise, "calibration": self.calibration}


# ---- checks ---------------------------------------------------------------------------------
def _pair_cases(b: RunSource, c: RunSource, allow: bool, warnings: list[str]) -> list[str]:
    bid, cid = b.by_id(), c.by_id()
    only_b = [k for k in bid if k not in cid]
    only_c = [k for k in cid if k not in bid]
    shared = [k for k in bid if k in cid]
    if only_b or only_c:
        def some(ids: list[str]) -> str:
            return ", ".join(ids[:3]) + (", ..." if len(ids) > 3 else "")
        what = (f"the case sets differ: {len(only_b)} only in the baseline"
                + (f" ({some(only_b)})" if only_b else "")
                + f", {len(only_c)} only in the candidate" + (f" ({some(only_c)})" if only_c
                                                             else ""))
        if not allow:
            raise UserError(f"{what}; pass --allow-case-mismatch to compare the "
                            f"{len(shared)} shared cases")
        if not shared:
            raise UserError(f"{what}; no case is in both runs")
        warnings.append(f"{what}: only the {len(shared)} cases in both runs are compared")
    return shared


def _check_versions(b: RunSource, c: RunSource, families: set[str], allow: bool,
                    warnings: list[str]) -> tuple[dict, set[str]]:
    vb = b.metrics.get("metric_versions") or {}
    vc = c.metrics.get("metric_versions") or {}
    bad = sorted(f for f in families if vb.get(f) != vc.get(f))
    versions = {"baseline": vb, "candidate": vc,
                "mismatched": {f: {"baseline": vb.get(f), "candidate": vc.get(f)} for f in bad}}
    db, dc = vb.get("diagnosis"), vc.get("diagnosis")
    if db is not None and dc is not None and db != dc:
        warnings.append(f"the runs were diagnosed under different thresholds (diagnosis "
                        f"version: baseline {db}, candidate {dc}): their diagnosis counts "
                        "are not comparable")
    if bad:
        what = "; ".join(f"{f}: baseline {vb.get(f)}, candidate {vc.get(f)}" for f in bad)
        if not allow:
            raise VersionMismatch(f"metric versions differ ({what}); the runs were graded "
                                  "differently: pass --allow-version-mismatch to compare anyway")
        warnings.append(f"metric versions differ ({what}): those families' rows are marked "
                        "not comparable")
    return versions, set(bad)


def _check_complete(runs: dict[str, RunSource], allow: bool, warnings: list[str]) -> None:
    for role, src in runs.items():
        why = src.incomplete()
        if why is None:
            continue
        if not allow:
            raise UserError(f"the {role} run {src.ref} did not finish ({why}); "
                            "pass --allow-incomplete to compare it anyway")
        warnings.append(f"the {role} run did not finish ({why})")


# ---- the comparison -------------------------------------------------------------------------
def _layout(m: Any) -> tuple[tuple[str, ...], tuple]:
    """A row's metrics as ``(names, values)``: the shared tuples of a compact row
    (raglab.compare.load.MetricRow), or a dict's keys and values."""
    layout = getattr(m, "layout", None)
    return layout() if layout is not None else (tuple(m), tuple(m.values()))


def _metric_names(b: RunSource, c: RunSource, ids: list[str]) -> tuple[list[str], list[str]]:
    """Metrics reported by both runs (in the baseline's order), and those only one has."""
    def names(src: RunSource) -> dict[str, None]:
        seen: dict[str, None] = {}
        layouts: dict[int, tuple[str, ...]] = {}   # rows share their names tuple
        by = src.by_id()
        for cid in ids:
            keys = _layout(by[cid]["metrics"])[0]
            if layouts.setdefault(id(keys), keys) is keys:
                for k in keys:
                    seen.setdefault(k, None)
        return seen

    nb, nc = names(b), names(c)
    return [n for n in nb if n in nc], sorted(set(nb) ^ set(nc))


def _matrix(src: RunSource, ids: list[str], names: list[str]):
    """``(len(ids), len(names))`` floats; NaN where a metric does not apply (None)."""
    from operator import itemgetter

    import numpy as np

    by = src.by_id()
    getters: dict[int, tuple[tuple[str, ...], Any]] = {}

    def getter(keys: tuple[str, ...]):
        got = getters.get(id(keys))
        if got is None or got[0] is not keys:
            index = {k: i for i, k in enumerate(keys)}
            # a name the row lacks reads the None appended after its values
            got = (keys, itemgetter(*[index.get(n, len(keys)) for n in names]))
            getters[id(keys)] = got
        return got[1]

    rows = []
    for cid in ids:
        keys, values = _layout(by[cid]["metrics"])
        picked = getter(keys)(values + (None,)) if names else ()
        rows.append(picked if len(names) != 1 else (picked,))
    try:
        return np.array(rows, dtype=float).reshape(len(ids), len(names))   # None: NaN
    except (TypeError, ValueError):          # a non-numeric value somewhere: cell by cell
        out = np.full((len(ids), len(names)), np.nan)
        for i, row in enumerate(rows):
            for j, v in enumerate(row):
                if isinstance(v, int | float) and not isinstance(v, bool):
                    out[i, j] = v
        return out


def _slice_groups(b: RunSource, ids: list[str]) -> dict[tuple[str, str], list[int]]:
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    by = b.by_id()
    for i, cid in enumerate(ids):
        r = by[cid]
        if "gold" not in r:
            r = {**r, "gold": {"answerable": True}}
        for k, v in slice_keys(r).items():
            groups[(k, v)].append(i)
    return dict(sorted(groups.items()))


def _num(x) -> float | None:
    return None if x is None else float(x)


def compare_runs(baseline: RunSource, candidate: RunSource, cfg: CompareCfg, *,
                 allow_case_mismatch: bool = False, allow_version_mismatch: bool = False,
                 allow_incomplete: bool = False) -> Comparison:
    """Compare ``candidate`` with ``baseline``. UserError on an incomplete run or different
    case sets, VersionMismatch on different metric versions (unless allowed)."""
    import numpy as np

    warnings: list[str] = []
    _check_complete({"baseline": baseline, "candidate": candidate}, allow_incomplete, warnings)
    ids = _pair_cases(baseline, candidate, allow_case_mismatch, warnings)
    names, unpaired = _metric_names(baseline, candidate, ids)
    families = {f for f in map(family_of, names) if f}
    versions, bad = _check_versions(baseline, candidate, families, allow_version_mismatch,
                                    warnings)
    warnings += self_graded_warnings(baseline, candidate)
    metrics: dict[str, dict[str, Any]] = {}
    for n in names:
        spec = spec_of(n)
        metrics[n] = {"family": spec.family if spec else None,
                      "direction": spec.direction if spec else "none",
                      "kind": spec.kind if spec else "share",
                      "headline": n in HEADLINE}
    kinds = [metrics[n]["kind"] for n in names]
    directions = [metrics[n]["direction"] for n in names]
    B, C = _matrix(baseline, ids, names), _matrix(candidate, ids, names)
    weights = case_weights(baseline, ids)
    other = case_weights(candidate, ids)
    if (weights is None) != (other is None) or (
            weights is not None and other is not None and not np.array_equal(weights, other)):
        warnings.append("the runs weigh the cases differently (dataset.weights or case "
                        "weights changed): the baseline's weights are used")
    clusters = None if cfg.cluster is None else cluster_labels(baseline, ids, cfg.cluster)
    groups: list[tuple[tuple[str, str] | None, Any]] = [(None, np.arange(len(ids)))]
    groups += [(key, np.asarray(idx)) for key, idx in _slice_groups(baseline, ids).items()]
    rows: list[dict[str, Any]] = []
    info: list[dict[str, Any]] = []
    slices: list[dict[str, Any]] = []
    design = _Design(B, C, names, kinds, directions, weights, clusters, cfg)
    from raglab.stats.threads import blas_threads

    with blas_threads():
        tables = [design.table(idx) for _, idx in groups]
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
                "cluster": cfg.cluster,
                "n_clusters": None if clusters is None else len(set(clusters.tolist())),
                "weighted": weights is not None,
                "n_eff": None if weights is None else
                float(weights.sum() ** 2 / max((weights ** 2).sum(), 1e-300)),
                "flip_thresholds": dict(cfg.flip_thresholds), "unpaired_metrics": unpaired}
    comp = Comparison(baseline, candidate, rows, {}, {}, versions, warnings, settings, info,
                      slices, metrics)
    comp._design = design
    comp._groups = {key: idx for key, idx in groups}
    comp.flipped = flipped_cases(baseline, candidate, ids, cfg)
    comp.diagnoses = diagnosis_counts(baseline, candidate, ids)
    from raglab.compare.noise import grader_noise

    comp.grader_noise = grader_noise(baseline, candidate, ids, rows, cfg.confidence)
    return comp


ADJUST_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg"}


class _Design:
    """The paired per-case values of a comparison and how they are tested."""

    def __init__(self, B, C, names, kinds, directions, weights, clusters, cfg: CompareCfg):
        self.B, self.C, self.kinds, self.directions = B, C, kinds, directions
        self.weights, self.clusters, self.cfg = weights, clusters, cfg
        self.names: dict[str, int] = {n: j for j, n in enumerate(names)}

    def table(self, idx):
        from raglab.stats import paired_table

        cfg = self.cfg
        return paired_table(self.B[idx], self.C[idx], self.kinds, self.directions,
                            confidence=cfg.confidence, n_resamples=cfg.n_bootstrap,
                            seed=cfg.seed, interval=cfg.interval,
                            weights=None if self.weights is None else self.weights[idx],
                            clusters=None if self.clusters is None else self.clusters[idx])

    def one_sided(self, idx, metric: str, theta: float, side: str) -> float | None:
        from raglab.stats import one_sided

        j = self.names[metric]
        return one_sided(self.B[idx][:, [j]], self.C[idx][:, [j]], [theta], [side],
                         n_resamples=self.cfg.n_bootstrap, seed=self.cfg.seed,
                         weights=None if self.weights is None else self.weights[idx],
                         clusters=None if self.clusters is None else self.clusters[idx])[0]


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
        if rows[i]["comparable"]:
            rows[i]["p_adjusted"] = rows[rep]["p_adjusted"]
            info[i]["significant"] = info[rep]["significant"]
    return {fam: len(m) for fam, m in members.items()}


def case_weights(src: RunSource, ids: list[str]):
    """Each case's weight (its record's ``weight``, 1 where absent), or None when every
    weight is 1 (an unweighted comparison)."""
    import numpy as np

    by = src.by_id()
    w = np.array([float(by[cid].get("weight", 1.0)) for cid in ids], dtype=np.float64)
    return None if w.size == 0 or bool((w == 1.0).all()) else w


def cluster_labels(src: RunSource, ids: list[str], key: str):
    """The cluster of each case: its tag ``key``'s value; a case without the tag is its own
    cluster."""
    import numpy as np

    by = src.by_id()
    out = []
    for cid in ids:
        v = (by[cid].get("tags") or {}).get(key)
        out.append(f"v:{v}" if v is not None else f"case:{cid}")
    return np.asarray(out)


# ---- flipped cases and diagnoses ------------------------------------------------------------
def passes(metric: str, value: float, threshold: float) -> bool:
    spec = spec_of(metric)
    if spec is not None and spec.direction == "lower":
        return value <= threshold
    return value >= threshold


def diagnosis_of(rec: dict) -> Any:
    """A record's diagnosis: None (passed), a dict, or ``"not recorded"`` (older runs)."""
    return rec["diagnosis"] if "diagnosis" in rec else NOT_RECORDED


def flipped_cases(b: RunSource, c: RunSource, ids: list[str], cfg: CompareCfg) -> dict:
    bid, cid = b.by_id(), c.by_id()
    found: dict[str, dict[str, list[str]]] = {}
    for metric, t in cfg.flip_thresholds.items():
        assert t is not None  # CompareCfg's validator drops null thresholds
        flips: dict[str, list[str]] = {"pass_to_fail": [], "fail_to_pass": []}
        for case in ids:
            vb, vc = bid[case]["metrics"].get(metric), cid[case]["metrics"].get(metric)
            if vb is None or vc is None:
                continue
            pb, pc = passes(metric, vb, t), passes(metric, vc, t)
            if pb != pc:
                flips["pass_to_fail" if pb else "fail_to_pass"].append(case)
        found[metric] = flips
    wanted = {x for f in found.values() for lst in f.values() for x in lst[:cfg.max_flipped]}
    qs = questions(c, wanted) or questions(b, wanted)
    answers = {"b": b.answers(wanted), "c": c.answers(wanted)}  # read again: rows keep none
    out = {}
    for metric, flips in found.items():
        spec = spec_of(metric)
        entry: dict[str, Any] = {"threshold": cfg.flip_thresholds[metric],
                                 "direction": spec.direction if spec else "higher"}
        for way, lst in flips.items():
            entry[f"n_{way}"] = len(lst)
            entry[way] = [{
                "case_id": x, "question": qs.get(x),
                "baseline": bid[x]["metrics"].get(metric),
                "candidate": cid[x]["metrics"].get(metric),
                "baseline_answer": answers["b"].get(x), "candidate_answer": answers["c"].get(x),
                "baseline_diagnosis": diagnosis_of(bid[x]),
                "candidate_diagnosis": diagnosis_of(cid[x]),
            } for x in lst[:cfg.max_flipped]]
        out[metric] = entry
    return out


def _causes(rec: dict) -> list[str]:
    d = diagnosis_of(rec)
    if d == NOT_RECORDED:
        return [NOT_RECORDED]
    if d is None:
        return [PASSED]
    causes = d.get("causes") if isinstance(d, dict) else None
    return [str(x) for x in causes] if causes else ["unspecified"]


def diagnosis_counts(b: RunSource, c: RunSource, ids: list[str]) -> dict:
    """Cases per diagnosis cause in each run, overall and per slice (a case with several
    causes counts once under each)."""
    bid, cid = b.by_id(), c.by_id()
    overall: dict[str, Counter] = {"baseline": Counter(), "candidate": Counter()}
    per: dict[str, dict[str, dict[str, Counter]]] = defaultdict(
        lambda: defaultdict(lambda: {"baseline": Counter(), "candidate": Counter()}))
    for case in ids:
        rb = bid[case]
        keys = slice_keys(rb if "gold" in rb else {**rb, "gold": {"answerable": True}})
        for role, rec in (("baseline", rb), ("candidate", cid[case])):
            causes = _causes(rec)
            overall[role].update(causes)
            for k, v in keys.items():
                per[k][v][role].update(causes)
    recorded = {role: any("diagnosis" in r for r in (src.by_id()[x] for x in ids))
                for role, src in (("baseline", b), ("candidate", c))}
    return {"recorded": recorded,
            "overall": {role: dict(cnt) for role, cnt in overall.items()},
            "slices": {k: {v: {role: dict(cnt) for role, cnt in roles.items()}
                           for v, roles in sorted(vals.items())}
                       for k, vals in sorted(per.items())}}
