"""Cases that flipped between pass and fail, and diagnosis counts, of a comparison."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from raglab.compare.config import CompareCfg
from raglab.compare.load import RunSource, questions
from raglab.metrics.aggregate import slice_keys, value_order
from raglab.metrics.catalog import spec_of

NOT_RECORDED = "not recorded"
PASSED = "passed"


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
                           for v, roles in sorted(vals.items(), key=lambda vr: value_order(vr[0]))}
                       for k, vals in sorted(per.items())}}
