"""The paired table of a comparison: both runs read once into one aligned structure.

Cases paired on case ids (``ids``), the metrics both runs report (``names``, with their
family, direction and kind), the per-case values of each run as ``(cases x metrics)``
matrices (NaN where a metric does not apply), case weights, cluster labels and the case
positions of every slice. Built once by :func:`pair_runs`; the statistics
(:mod:`raglab.compare.comparison`) are functions of it, and it checks what makes two runs
comparable (finished, same cases, same metric versions) on the way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from raglab.compare.config import CompareCfg
from raglab.compare.load import RunSource
from raglab.errors import UserError
from raglab.metrics.aggregate import slice_keys, slice_order
from raglab.metrics.catalog import HEADLINE, family_of, spec_of


class VersionMismatch(UserError):
    """Metric versions differ where the comparison needs them equal (the CLI exits 3)."""


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
        for k, v in slice_keys(by[cid]).items():
            groups[(k, v)].append(i)
    return dict(sorted(groups.items(), key=lambda kv: slice_order(kv[0])))


def case_weights(src: RunSource, ids: list[str]):
    """Each case's weight (its record's ``weight``, 1 where absent), or None when every
    weight is 1 (an unweighted comparison)."""
    import numpy as np

    by = src.by_id()
    w = np.array([float(by[cid].get("weight", 1.0)) for cid in ids], dtype=np.float64)
    return None if w.size == 0 or bool((w == 1.0).all()) else w


#: the tag a conversation's turns carry (raglab.data.conversation): compare clusters by it
#: unless ``compare.cluster`` says otherwise
CONVERSATION_TAG = "conversation"
#: ``compare.cluster=none``: no clusters, even on conversations
NO_CLUSTER = "none"


def cluster_key(src: RunSource, ids: list[str], given: str | None) -> str | None:
    """The tag key the comparison clusters by: ``compare.cluster`` when set (``none``:
    no clusters); unset, ``conversation`` when any case is a conversation's turn (its turns
    are not independent), else None."""
    if given is not None:
        return None if given == NO_CLUSTER else given
    by = src.by_id()
    if any(CONVERSATION_TAG in (by[cid].get("tags") or {}) for cid in ids):
        return CONVERSATION_TAG
    return None


def clustering(key: str | None, n: int | None, untagged: int = 0) -> str | None:
    """What a comparison clustered by, in a few words ("clustered by conversation (N
    conversations)"); None when it did not. ``n`` counts the clusters, ``untagged`` of
    them the cases without the tag (each its own cluster): beside conversations, these are
    single-turn cases, not conversations."""
    if not key:
        return None
    if key == "conversation":
        return f"clustered by conversation ({conversations_words(n, untagged)})"
    return f"clustered by tag {key} ({n} clusters)"


def conversations_words(n: int | None, untagged: int = 0) -> str:
    """"N conversations", and the single-turn cases beside them (``n`` counts both)."""
    if not untagged or n is None:
        return f"{n} conversations"
    return (f"{n - untagged} conversations; {untagged} single-turn case"
            f"{'s' if untagged != 1 else ''}, each its own unit")


def untagged_clusters(labels: Any) -> int:
    """The clusters of :func:`cluster_labels` that are a case without the tag."""
    return sum(1 for x in set(labels) if str(x).startswith("case:"))


def cluster_labels(src: RunSource, ids: list[str], key: str):
    """The cluster of each case: its tag ``key``'s value; a case without the tag is its own
    cluster. UserError when no case has the tag (a mistyped key)."""
    import numpy as np

    by = src.by_id()
    out = []
    for cid in ids:
        v = (by[cid].get("tags") or {}).get(key)
        out.append(f"v:{v}" if v is not None else f"case:{cid}")
    if ids and not any(x.startswith("v:") for x in out):
        keys = sorted({k for cid in ids for k in (by[cid].get("tags") or {})})
        raise UserError(f"compare.cluster={key}: no case has the tag {key!r} (tags: "
                        f"{', '.join(keys) or 'none'})")
    return np.asarray(out)



@dataclass
class PairedTable:
    """Two runs' per-case values aligned on case ids, and how they are tested."""
    baseline: RunSource
    candidate: RunSource
    cfg: CompareCfg
    ids: list[str]
    names: list[str]
    unpaired: list[str]
    metrics: dict[str, dict[str, Any]]        # name -> family, direction, kind, headline
    B: Any                                    # (cases x metrics) baseline values
    C: Any                                    # candidate values
    weights: Any                              # one per case, or None (unweighted)
    clusters: Any                             # one label per case, or None
    groups: list[tuple[tuple[str, str] | None, Any]]   # (slice, case positions); None: all
    versions: dict
    mismatched: set[str]                      # families whose metric versions differ
    warnings: list[str] = field(default_factory=list)

    @property
    def kinds(self) -> list[str]:
        return [self.metrics[n]["kind"] for n in self.names]

    @property
    def directions(self) -> list[str]:
        return [self.metrics[n]["direction"] for n in self.names]

    def positions(self, slice: tuple[str, str] | None):
        """The case positions of ``slice`` ((key, value); None: every case), or None."""
        key = None if slice is None else (str(slice[0]), str(slice[1]))
        return dict(self.groups).get(key)

    def stats(self, idx):
        """``paired_table`` of the cases at positions ``idx``, every metric."""
        from raglab.stats import paired_table

        cfg = self.cfg
        return paired_table(self.B[idx], self.C[idx], self.kinds, self.directions,
                            confidence=cfg.confidence, n_resamples=cfg.n_bootstrap,
                            seed=cfg.seed, interval=cfg.interval,
                            weights=None if self.weights is None else self.weights[idx],
                            clusters=None if self.clusters is None else self.clusters[idx])

    def score_basis(self, idx, metric: str, scaled: bool):
        """What the score interval of ``metric`` on the cases at ``idx`` was made of
        (raglab.stats.settle.score_basis): gain, loss and (effective) cases, and with
        ``scaled`` the moments of a share's scale."""
        from raglab.stats.settle import score_basis

        j = self.names.index(metric)
        return score_basis(self.B[idx][:, j], self.C[idx][:, j],
                           None if self.weights is None else self.weights[idx], scaled)

    def one_sided(self, idx, metric: str, theta: float, side: str) -> float | None:
        """The one-sided test of ``metric`` at ``theta`` on the cases at ``idx``: the test
        whose inversion is that metric's interval."""
        from raglab.stats import one_sided

        j = self.names.index(metric)
        cfg = self.cfg
        return one_sided(self.B[idx][:, [j]], self.C[idx][:, [j]], [theta], [side],
                         kinds=[self.kinds[j]], interval=cfg.interval,
                         n_resamples=cfg.n_bootstrap, seed=cfg.seed,
                         weights=None if self.weights is None else self.weights[idx],
                         clusters=None if self.clusters is None else self.clusters[idx])[0]


def dataset_warnings(db: dict[str, Any], dc: dict[str, Any],
                     said: Sequence[str] = ()) -> list[str]:
    """A warning for each data file the two runs' ``dataset`` sections hash differently
    (an edited case, or a conversation's earlier turn, changes what the cases are), unless
    ``said`` has it already; nothing where a run records no hash (an unfinished run)."""
    out = []
    for what in ("cases_sha256", "corpus_sha256"):
        if db.get(what) and dc.get(what) and db[what] != dc[what]:
            head = f"the runs used different {what.split('_')[0]} files"
            if not any(w.startswith(head) for w in said):
                out.append(f"{head} ({str(db.get(what))[:12]} and {str(dc.get(what))[:12]})")
    return out


def pair_runs(baseline: RunSource, candidate: RunSource, cfg: CompareCfg, *,
              allow_case_mismatch: bool = False, allow_version_mismatch: bool = False,
              allow_incomplete: bool = False) -> PairedTable:
    """Read both runs once into a :class:`PairedTable`. UserError on an incomplete run or
    different case sets, VersionMismatch on different metric versions (unless allowed).
    Clusters: :func:`cluster_key` (conversations by default); the table's ``cfg`` holds
    the key used."""
    import numpy as np

    from raglab.compare.trust import self_graded_warnings

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
    B, C = _matrix(baseline, ids, names), _matrix(candidate, ids, names)
    weights = case_weights(baseline, ids)
    other = case_weights(candidate, ids)
    if (weights is None) != (other is None) or (
            weights is not None and other is not None and not np.array_equal(weights, other)):
        warnings.append("the runs weigh the cases differently (dataset.weights or case "
                        "weights changed): the baseline's weights are used")
    warnings += dataset_warnings(baseline.metrics.get("dataset") or {},
                                 candidate.metrics.get("dataset") or {}, warnings)
    hb, hc = (((src.metrics.get("conversations") or {}).get("history"))
              for src in (baseline, candidate))
    if hb and hc and hb != hc:  # conversation.history: each turn was given another prefix
        warnings.append(f"the runs gave the turns different histories (conversation.history: "
                        f"baseline {hb}, candidate {hc}): paired by turn, the turns did not "
                        "answer the same conversations")
    by = cluster_key(baseline, ids, cfg.cluster)
    if by != cfg.cluster:  # the table's cfg (and so the settings) says what it clustered by
        cfg = cfg.model_copy(update={"cluster": by})
    clusters = None if by is None else cluster_labels(baseline, ids, by)
    groups: list[tuple[tuple[str, str] | None, Any]] = [(None, np.arange(len(ids)))]
    groups += [(key, np.asarray(idx)) for key, idx in _slice_groups(baseline, ids).items()]
    return PairedTable(baseline, candidate, cfg, ids, names, unpaired, metrics, B, C, weights,
                       clusters, groups, versions, bad, warnings)
