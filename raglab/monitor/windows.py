"""Per-window figures of judged traffic lines, and the alerts (pure functions).

Judged metrics (:data:`JUDGED`, the declarations reported by the monitor; on the sampled
lines; a line's value is ``None`` where it does not apply, e.g. faithfulness of an
abstention, and a window's value is the mean of the lines where it applies):
``faithfulness``, ``contradicted_claim_rate``, ``relevance`` and
``reference_free_context_precision`` (share of context passages that support at least one
claim of the answer, as judged by the grader; no labels). Retrieval statistics (on every
line of the window):
``top1_score`` mean and 10th/50th/90th percentiles, ``no_hits_rate`` (lines that retrieved
nothing) and ``feedback_down_rate`` (``down`` among lines with ``up``/``down`` feedback).

Lines of conversations (a session id) also give the same figures per turn
(:func:`turn_table`: ``by_turn`` of monitor.json; no alert is tested per turn).

The contradiction alert's unit is the judged line (an answer with judged claims): claims of
one answer share its context and its generation, so they are not independent draws, and
lines are. ``contradicted_lines`` counts the judged lines with at least one CONTRADICTED
claim, ``contradicted_line_rate`` is their share; the alert tests that share with an exact
one-sided test (:mod:`raglab.stats.rates`), and a window with too few judged lines for the
test is reported untested (an ``alerts.json`` entry with ``status: untested``), never
passing in silence. The drift test likewise reports the windows it could not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from raglab.metrics.catalog import MONITORED as JUDGED
from raglab.stats import rates


@dataclass
class LineResult:
    window: datetime
    top1: float | None
    has_hits: bool
    feedback: str | None
    sampled: bool
    metrics: dict[str, float | None] = field(default_factory=dict)  # judged lines only
    grader_error: bool = False
    turn: int | None = None  # a conversation's turn (the line has a session id)


def _mean(vals: Sequence[float]) -> float | None:
    return float(np.mean(vals)) if len(vals) else None


def figures(rs: Sequence[LineResult]) -> dict[str, Any]:
    """The figures of a group of lines (a window, a turn): counts, the judged metrics'
    means (each with its ``.n``), contradicted lines, top-1 scores, no-hits and feedback."""
    judged = [r for r in rs if r.sampled and not r.grader_error]
    scores = [r.top1 for r in rs if r.top1 is not None]
    fb = [r.feedback.strip().lower() for r in rs
          if r.feedback and r.feedback.strip().lower() in ("up", "down")]
    w: dict[str, Any] = {"lines": len(rs), "sampled": sum(r.sampled for r in rs),
                         "judged": len(judged), "grader_errors": sum(r.grader_error for r in rs)}
    for name in JUDGED:
        vals = [v for r in judged if (v := r.metrics.get(name)) is not None]
        w[name] = _mean(vals)
        w[f"{name}.n"] = len(vals)
    flags = [v > 0 for r in judged if (v := r.metrics.get("contradicted_claim_rate"))
             is not None]
    w["contradicted_lines"] = sum(flags)
    w["contradicted_line_rate"] = _mean([float(f) for f in flags])
    w["top1_score.n"] = len(scores)
    w["top1_score.mean"] = _mean(scores)
    for q in (10, 50, 90):
        w[f"top1_score.p{q}"] = float(np.percentile(scores, q)) if scores else None
    w["no_hits_rate"] = _mean([0.0 if r.has_hits else 1.0 for r in rs])
    w["feedback_down_rate"] = _mean([1.0 if f == "down" else 0.0 for f in fb])
    w["_scores"] = scores
    return w


def window_table(results: Sequence[LineResult], seconds: int) -> list[dict[str, Any]]:
    by: dict[datetime, list[LineResult]] = {}
    for r in results:
        by.setdefault(r.window, []).append(r)
    out = []
    for start in sorted(by):
        w = {"start": start.isoformat(),
             "end": (start + timedelta(seconds=seconds)).isoformat(), **figures(by[start])}
        out.append(w)
    return out


def turn_table(results: Sequence[LineResult]) -> dict[str, dict[str, Any]]:
    """``{TURN: figures}`` of the lines of conversations, turn "1", "2", ... in order
    (lines without a session left out; {} when there are none)."""
    by: dict[int, list[LineResult]] = {}
    for r in results:
        if r.turn is not None:
            by.setdefault(r.turn, []).append(r)
    out = {}
    for turn in sorted(by):
        f = figures(by[turn])
        f.pop("_scores")
        out[str(turn)] = f
    return out


def contradiction_counts(results: Sequence[LineResult]) -> tuple[int, int]:
    """``(contradicted lines, judged lines with claims)`` of judged lines (the baseline's)."""
    vals = [v for r in results if r.sampled and not r.grader_error
            and (v := r.metrics.get("contradicted_claim_rate")) is not None]
    return sum(v > 0 for v in vals), len(vals)


def _window_keys(w: dict[str, Any]) -> dict[str, Any]:
    return {"window_start": w["start"], "window_end": w["end"]}


def _untested(w: dict[str, Any], alert: str, reason: str, **counts: Any) -> dict[str, Any]:
    return {"status": "untested", "kind": "untested", "alert": alert, **_window_keys(w),
            "reason": reason, **counts,
            "message": f"window {w['start']}: {alert} untested: {reason}"}


def contradiction_check(w: dict[str, Any], baseline: tuple[int, int] | None, *,
                        max_contradicted: float, confidence: float,
                        min_judged: int) -> dict[str, Any] | None:
    """The contradiction alert (or untested entry) of one window, None when it passes; the
    test's figures are stored in the window (``contradiction.*``)."""
    k, n = w["contradicted_lines"], w["contradicted_claim_rate.n"]
    w["contradiction.status"] = "untested"
    w["contradiction.ci_low"] = w["contradiction.p_value"] = None
    pct = f"{confidence:.0%}"
    if n < min_judged:
        return _untested(w, "contradicted_claim_rate",
                         f"{n} judged line(s) < {min_judged} (monitor.min_judged)", n=n)
    if baseline is None:
        need = rates.min_units_above(max_contradicted, confidence)
        if need == 0 or n < need:
            return _untested(w, "contradicted_claim_rate",
                             f"{n} judged line(s): the test at {pct} confidence needs at least "
                             f"{need} to be able to alert above {max_contradicted:g}" if need
                             else f"threshold {max_contradicted:g} cannot be exceeded", n=n)
        t = rates.rate_above(k, n, max_contradicted, confidence)
        w["contradiction.ci_low"], w["contradiction.p_value"] = t.ci_low, t.p_value
        w["contradiction.status"] = "alert" if t.reject else "ok"
        if not t.reject:
            return None
        return {"status": "alert", "kind": "contradicted_claim_rate", **_window_keys(w),
                "value": w["contradicted_claim_rate"], "threshold": max_contradicted, "n": n,
                "contradicted": k, "rate": t.rate, "ci_low": t.ci_low, "p_value": t.p_value,
                "confidence": confidence, "unit": "judged line",
                "test": "exact one-sided binomial (Clopper-Pearson lower bound)",
                "message": f"window {w['start']}: {k} of {n} judged lines contradicted "
                           f"({t.rate:.3f}), {pct} lower bound {t.ci_low:.3f} > "
                           f"{max_contradicted:g} (monitor.max_contradicted)"}
    bk, bn = baseline
    if not rates.can_reject_vs_baseline(n, bn, confidence):
        return _untested(w, "contradicted_claim_rate",
                         f"{n} judged line(s) against the baseline's {bn}: the test at {pct} "
                         "confidence cannot alert", n=n, baseline_n=bn)
    t = rates.rate_above_baseline(k, n, bk, bn, confidence)
    w["contradiction.p_value"] = t.p_value
    w["contradiction.status"] = "alert" if t.reject else "ok"
    if not t.reject:
        return None
    assert t.p_value is not None and t.rate is not None
    return {"status": "alert", "kind": "contradicted_claim_rate", **_window_keys(w),
            "value": w["contradicted_claim_rate"], "threshold": None, "n": n,
            "contradicted": k, "rate": t.rate, "ci_low": None, "p_value": t.p_value,
            "confidence": confidence, "unit": "judged line",
            "test": "one-sided Fisher exact, window vs baseline",
            "baseline_contradicted": bk, "baseline_n": bn, "baseline_rate": bk / bn,
            "message": f"window {w['start']}: {k} of {n} judged lines contradicted "
                       f"({t.rate:.3f}) against the baseline's {bk} of {bn} ({bk / bn:.3f}): "
                       f"one-sided Fisher exact p {t.p_value:.2g} < {1 - confidence:.2g}"}


def find_alerts(windows: list[dict[str, Any]], baseline_scores: Sequence[float] | None, *,
                max_contradicted: float, drift_p: float, drift_min_effect: float,
                min_lines: int, confidence: float = 0.95, min_judged: int = 5,
                baseline_contradicted: tuple[int, int] | None = None
                ) -> list[dict[str, Any]]:
    """The alerts and untested entries (``status``) of every window, in window order (and
    the tests' figures stored in the window). ``baseline_contradicted``: the baseline's
    ``(contradicted lines, judged lines)``, which the contradiction test then compares with."""
    from scipy.stats import ks_2samp

    alerts: list[dict[str, Any]] = []
    base = np.asarray(baseline_scores if baseline_scores is not None else [], dtype=float)
    for w in windows:
        c = contradiction_check(w, baseline_contradicted, max_contradicted=max_contradicted,
                                confidence=confidence, min_judged=min_judged)
        if c is not None:
            alerts.append(c)
        scores = np.asarray(w["_scores"], dtype=float)
        w["drift.ks_d"] = w["drift.p_value"] = None
        if baseline_scores is None:
            continue
        if len(scores) < min_lines or len(base) < min_lines:
            alerts.append(_untested(
                w, "retrieval_score_drift", f"{len(scores)} scored line(s), baseline "
                f"{len(base)}: fewer than {min_lines} (monitor.min_lines)",
                n=int(len(scores)), baseline_n=int(len(base))))
            continue
        res = ks_2samp(scores, base)
        d, p = float(res.statistic), float(res.pvalue)
        w["drift.ks_d"], w["drift.p_value"] = d, p
        if p < drift_p and d >= drift_min_effect:
            alerts.append({
                "status": "alert", "kind": "retrieval_score_drift", **_window_keys(w),
                "ks_d": d, "p_value": p, "n": int(len(scores)),
                "baseline_n": int(len(base)), "median": float(np.median(scores)),
                "baseline_median": float(np.median(base)),
                "message": f"window {w['start']}: top-1 retrieval scores shifted from the "
                           f"baseline (KS D {d:.3f} >= {drift_min_effect:g}, p {p:.2g} < "
                           f"{drift_p:g}; median {np.median(scores):.3g} vs "
                           f"{np.median(base):.3g}; {len(scores)} vs {len(base)} lines)"})
    return alerts


def real_alerts(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries of alerts.json that are alerts (not ``status: untested``; entries written
    before the status field are alerts)."""
    return [a for a in entries if a.get("status", "alert") != "untested"]
