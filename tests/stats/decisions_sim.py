"""Simulated decisions: how often a gate check says GO where the truth is a breach, and
NO-GO where nothing changed (docs/statistics.md, "Error rates of the decisions").

Each cell simulates ``k`` paired data sets of ``n`` cases at once (one column each, one call
of :func:`raglab.stats.paired_table`, as ``raglab compare`` makes them) and judges every
column with :func:`raglab.compare.decide.evaluate_gates`, as ``raglab decide`` does:

- a pass/fail metric (base rate 0.7): a share ``changed`` of the cases is discordant, gains
  and losses in the proportions that give the true difference;
- a graded share in [0, 1] (values 0.5 in the baseline; a changed case moves by 0.25 or 0.5
  either way, signs in the proportions that give the true difference).

Goals: GO (the check passes) at a true difference of exactly ``-margin`` (a breach of the
margin) at most 2.5%; NO-GO (the check fails) with nothing changed at most 2.5%; a
``not_worse`` check (which passes unless harm is shown) fails at most 2.5% at ``-margin``.

Shared by the slow test (tests/stats/test_decision_error_rates.py) and the benchmark
(``python -m tests.benchmarks decisions``).
"""

from __future__ import annotations

import numpy as np

MARGIN = 0.05
NS = (20, 30, 60, 100, 200, 300)
CHANGED = (0.15, 0.3)
KINDS = ("binary", "share")
RULES = ("non_inferior", "not_worse", "bound")


def pairs(kind: str, n: int, changed: float, delta: float, k: int,
          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(base, cand)``, each ``(n, k)``: ``k`` data sets of ``n`` paired cases whose true
    mean difference is ``delta``."""
    moved = rng.random((n, k)) < changed
    if kind == "binary":
        # discordant: gain with probability (changed + delta) / (2 changed)
        up = rng.random((n, k)) < (changed + delta) / (2 * changed)
        base = np.where(moved, np.where(up, 0.0, 1.0), (rng.random((n, k)) < 0.7) * 1.0)
        cand = np.where(moved, 1.0 - base, base)
        return base, cand
    size = rng.choice([0.25, 0.5], size=(n, k))          # mean 0.375
    up = rng.random((n, k)) < (1 + delta / (changed * 0.375)) / 2
    base = np.full((n, k), 0.5)
    return base, base + np.where(moved, np.where(up, size, -size), 0.0)


def _gate(rule: str) -> dict:
    if rule == "non_inferior":
        return {"metric": "faithfulness", "rule": "non_inferior", "margin": MARGIN}
    if rule == "not_worse":
        return {"metric": "faithfulness", "rule": "not_worse", "margin": MARGIN}
    # a rise of at most the margin, on the interval, where lower is better
    return {"metric": "contradicted_claim_rate", "rule": "bound", "max_increase": MARGIN,
            "by": "interval"}


def cell(kind: str, rule: str, n: int, changed: float, k: int, seed: int) -> dict:
    """Outcome rates of one gate check with a true change of exactly the margin the wrong
    way (``*_at_breach``) and with nothing changed (``*_at_null``): ``go_`` (the check
    passed), ``no_go_`` (failed) and ``inconclusive_``. The errors: ``go_at_breach`` of
    ``non_inferior`` and ``bound`` checks; ``no_go_at_null`` of every check; and for
    ``not_worse``, whose null hypothesis includes the margin, ``no_go_at_breach``."""
    from raglab.compare.decide import evaluate_gates
    from raglab.compare.gates import GateSet
    from raglab.stats import one_sided, paired_table

    gates = GateSet.model_validate({"gates": [_gate(rule)], "min_n": 1})
    gate = gates.gates[0]
    sign = -1.0 if gate.direction == "higher" else 1.0
    out: dict = {"kind": kind, "rule": rule, "n": n, "changed": changed, "k": k}
    rng = np.random.default_rng([seed, n, int(changed * 1000), KINDS.index(kind),
                                 RULES.index(rule)])
    for name, delta in (("breach", sign * MARGIN), ("null", 0.0)):
        base, cand = pairs(kind, n, changed, delta, k, rng)
        stats = paired_table(base, cand, [kind] * k, [gate.direction] * k,
                             confidence=gates.confidence, n_resamples=1000)
        ps: list = [None] * k
        if rule == "not_worse":
            theta = sign * MARGIN
            ps = one_sided(base, cand, [theta] * k, ["less" if sign < 0 else "greater"] * k,
                           kinds=[kind] * k, n_resamples=1000)
        statuses = []
        for j, st in enumerate(stats):
            row = {"metric": gate.metric, "slice": None, "baseline": float(base[:, j].mean()),
                   "candidate": float(cand[:, j].mean()), "delta": st.delta,
                   "ci_low": st.ci_low, "ci_high": st.ci_high, "p_value": st.p_value,
                   "p_adjusted": st.p_value, "n": st.n, "wins": st.wins, "ties": st.ties,
                   "losses": st.losses, "comparable": True, "mde": st.mde}
            # (no basis: the cases an inconclusive check needs are not the question here)
            res = evaluate_gates([row], gates, one_sided={(0, None): ps[j]},
                                 bases={(0, None): None})
            statuses.append(res[0]["status"])
        s = np.array(statuses)
        out[f"go_at_{name}"] = float((s == "pass").mean())
        out[f"no_go_at_{name}"] = float((s == "fail").mean())
        out[f"inconclusive_at_{name}"] = float((s == "inconclusive").mean())
    return out


ERRORS = {"non_inferior": ("go_at_breach", "no_go_at_null"),
          "bound": ("go_at_breach", "no_go_at_null"),
          "not_worse": ("no_go_at_breach", "no_go_at_null")}
GOAL = 0.025


def mc_se(k: int, p: float = GOAL) -> float:
    """The Monte Carlo standard error of a rate ``p`` estimated from ``k`` data sets."""
    return float(np.sqrt(p * (1 - p) / k))
