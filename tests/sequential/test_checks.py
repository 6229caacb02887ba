"""The checks a sequential run settles (raglab.sequential.run): which gates give which
checks, the refusals, bet targets and weights, and the error rates of the one-sample
sequence of a bound on the mean and of the sequential not_worse check by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from raglab.compare.gates import GateSet
from raglab.errors import UserError
from raglab.sequential.run import bet_target, checks_of, differences, settle_checks, weight_scale

ALPHA = 0.05


def _gates(*gates: dict, **extra) -> GateSet:
    return GateSet.model_validate({"gates": list(gates), **extra})


def _rows(values, metric="faithfulness", weights=None, tags=None):
    out = {}
    for i, v in enumerate(values):
        row = {"case_id": f"c{i:04d}", "tags": dict(tags[i]) if tags else {},
               "gold": {"answerable": True}, "metrics": {metric: v}}
        if weights is not None:
            row["weight"] = float(weights[i])
        out[row["case_id"]] = row
    return out


def test_which_gates_give_which_checks():
    gates = _gates({"metric": "faithfulness", "rule": "non_inferior", "margin": 0.05},
                   {"metric": "contradicted_claim_rate", "rule": "not_worse"},
                   {"metric": "faithfulness", "rule": "not_worse", "margin": 0.02,
                    "slices": "critical"},
                   {"metric": "false_answer_rate", "rule": "bound", "max": 0.5,
                    "max_increase": 0.05, "by": "interval"},
                   {"metric": "acl_leak_rate", "rule": "bound", "max": 0},
                   critical_slices=[{"key": "intent", "value": "api"}])
    checks = checks_of(gates, [])
    got = [(c.index, c.kind, c.slice, c.open_as, c.share,
            [(k.side, k.threshold) for k in c.conditions]) for c in checks]
    assert got == [
        (0, "delta", None, "inconclusive", 1.0, [("above", -0.05)]),
        (1, "delta", None, "pass", 1 / 3, [("below", 0.0)]),     # lower is better
        (2, "delta", None, "pass", 1 / 3, [("above", -0.02)]),
        (2, "delta", ("intent", "api"), "pass", 1 / 3, [("above", -0.02)]),
        (3, "delta", None, "inconclusive", 1.0, [("below", 0.05)]),
        (3, "mean", None, "fact", 1.0, [("below", 0.0)]),        # 2 * 0.5 - 1
        (4, "mean", None, "fact", 1.0, [("below", -1.0)]),       # 2 * 0 - 1
    ]


@pytest.mark.parametrize("gate,words", [
    ({"metric": "latency_ms.total", "rule": "bound", "max_increase": 100, "by": "interval"},
     "not in [0, 1] (latency)"),
    ({"metric": "cost_usd_per_query", "rule": "non_inferior", "margin": 0.01},
     "not in [0, 1] (cost)"),
    ({"metric": "final.first_gold_rank", "rule": "not_worse"}, "not in [0, 1] (rank)"),
    ({"metric": "false_answer_rate", "rule": "bound", "max_increase": 0.05},
     "by its estimate"),
])
def test_gates_that_cannot_be_sequential_are_refused_by_name(gate, words):
    gates = _gates({"metric": "faithfulness", "rule": "non_inferior", "margin": 0.05}, gate)
    with pytest.raises(UserError) as e:
        checks_of(gates, [], "sequential.gates=mine")
    assert e.value.message.startswith("sequential.gates=mine: gate 2 (")
    assert words in e.value.message


def test_bet_target_is_half_the_baselines_applicable_cases_of_the_slice():
    tags = [{"intent": "api" if i % 4 == 0 else "billing"} for i in range(100)]
    base = _rows([None if i % 10 == 9 else 1.0 for i in range(100)], tags=tags)
    gates = _gates({"metric": "faithfulness", "rule": "non_inferior", "margin": 0.05,
                    "slices": "critical"}, critical_slices=[{"key": "intent",
                                                             "value": "api"}])
    overall, api = checks_of(gates, base.values())
    order = list(base)
    assert bet_target(overall, order, base) == 45.0          # 90 apply
    assert bet_target(api, order, base) == 12.5              # 25 api cases, none a 9
    assert bet_target(api, order[:4], base) == 1.0           # at least 1


def test_weights_are_the_baselines_divided_by_its_largest():
    base = _rows([1.0, 1.0, 0.0], weights=[2.0, 4.0, 1.0])
    cand = _rows([1.0, 0.0, 1.0])
    (check,) = checks_of(_gates({"metric": "faithfulness", "rule": "non_inferior",
                                 "margin": 0.05}), base.values())
    scale = weight_scale(base.values())
    assert scale == 4.0
    d, w = differences(check, list(base), cand, base, "b", scale)
    assert d == [0.0, -1.0, 1.0] and w == [0.5, 1.0, 0.25]
    unweighted = _rows([1.0, 1.0, 0.0])
    assert differences(check, list(base), cand, unweighted, "b",
                       weight_scale(unweighted.values())) == ([0.0, -1.0, 1.0], None)


def test_a_mean_check_reads_the_candidate_alone():
    gates = _gates({"metric": "false_answer_rate", "rule": "bound", "max": 0.5})
    (check,) = checks_of(gates, [])
    base = _rows([None, 0.0, 1.0], metric="false_answer_rate")
    cand = _rows([1.0, None, 0.0], metric="false_answer_rate")
    assert differences(check, list(base), cand, base, "b") == ([1.0, -1.0], None)


def _rates(make, gates: GateSet, n: int, runs: int, seed: int) -> tuple[float, float]:
    """Shares of runs whose (single) check settles as pass / fail, looked at after every
    case (the tuned bets of a run of ``n`` cases)."""
    rng = np.random.default_rng(seed)
    out = {"pass": 0, "fail": 0, "inconclusive": 0}
    for _ in range(runs):
        base, cand = make(rng, n)
        checks = checks_of(gates, base.values())
        order = list(base)
        targets = [bet_target(c, order, base) for c in checks]
        (st,) = settle_checks(checks, order, cand, base, gates.alpha, "b", targets=targets)
        out[st.status] += 1
    return out["pass"] / runs, out["fail"] / runs


MAX_02 = _gates({"metric": "false_answer_rate", "rule": "bound", "max": 0.2})
NOT_WORSE_005 = _gates({"metric": "faithfulness", "rule": "not_worse", "margin": 0.05})


def _mean_at_bound(rng, n):       # the candidate's true mean is exactly the bound, 0.2
    base = _rows([0.0] * n, metric="false_answer_rate")
    return base, _rows((rng.random(n) < 0.2).astype(float), metric="false_answer_rate")


def _harm_at_margin(rng, n):      # true change exactly -0.05 (10% lost, 5% gained)
    base = _rows([0.5] * n)
    d = rng.choice([-0.5, 0.0, 0.5], size=n, p=[0.10, 0.85, 0.05])
    return base, _rows(0.5 + d)


def test_error_rates_of_mean_bounds_and_not_worse_quick():
    go, no_go = _rates(_mean_at_bound, MAX_02, 200, 200, seed=1)
    assert go <= 0.05 and no_go <= 0.05
    _, no_go = _rates(_harm_at_margin, NOT_WORSE_005, 200, 200, seed=2)
    assert no_go <= 0.05


@pytest.mark.slow
@pytest.mark.parametrize("n", [20, 100, 300])
def test_error_rates_of_mean_bounds_and_not_worse(n):
    """4000 runs each, looked at after every case: a bound on the mean whose true mean is
    the bound passes (and fails) at most alpha / 2 of the time; a not_worse check at a
    true change of exactly minus its margin fails at most alpha / 2 of the time (each plus
    three simulation errors)."""
    limit = 0.025 + 3 * math.sqrt(0.025 * 0.975 / 4000)
    go, no_go = _rates(_mean_at_bound, MAX_02, n, 4000, seed=n)
    assert go <= limit and no_go <= limit
    _, no_go = _rates(_harm_at_margin, NOT_WORSE_005, n, 4000, seed=n + 1)
    assert no_go <= limit


@pytest.mark.parametrize("gate", [
    {"metric": "latency_ms.total", "rule": "bound", "max": 2000},
    {"metric": "cost_usd_per_query", "rule": "bound", "max": 0.01},
    {"metric": "final.first_gold_rank", "rule": "bound", "max": 3, "min": 1},
])
def test_budgets_are_read_on_the_cases_run_and_hold_no_run(gate):
    gates = _gates({"metric": "faithfulness", "rule": "non_inferior", "margin": 0.05}, gate)
    assert [c.index for c in checks_of(gates, [], "sequential.gates=mine")] == [0]


def test_a_gate_set_of_budgets_alone_is_refused_saying_why():
    from types import SimpleNamespace

    from raglab.sequential.run import Sequential

    gates = _gates({"metric": "latency_ms.total", "rule": "bound", "max": 2000},
                   {"metric": "cost_usd_per_query", "rule": "bound", "max": 0.01})
    base = SimpleNamespace(records=[], by_id=dict, run_dir="base")
    with pytest.raises(UserError) as e:
        Sequential(SimpleNamespace(seed=0, batch=20), gates, "budgets", base)
    setting, why = str(e.value).split(": ", 1)
    assert setting == "sequential.gates=budgets" and "\n" not in why
    assert "budgets are read on the cases run" in why and "run every case" in why


def test_a_check_no_case_can_move_holds_no_run_back():
    # the slice's cases all weigh 0 (and a slice the baseline never applies to): their
    # sequences can never settle, which is known before the first case
    from types import SimpleNamespace

    from raglab.sequential.run import Sequential

    n = 300
    tags = [{"intent": "api" if i % 10 == 0 else "other"} for i in range(n)]
    weights = [0.0 if t["intent"] == "api" else 1.0 for t in tags]
    base = _rows([1.0] * n, weights=weights, tags=tags)
    gates = _gates({"metric": "faithfulness", "rule": "non_inferior", "margin": 0.05,
                    "slices": "critical"},
                   critical_slices=[{"key": "intent", "value": "api"},
                                    {"key": "intent", "value": "none"}])
    seq = Sequential(SimpleNamespace(seed=0, batch=20, against="base"), gates, "g",
                     SimpleNamespace(records=list(base.values()), by_id=lambda: base,
                                     run_dir="base"))
    order = seq.arrange(list(base))
    kept = {cid: base[cid] for cid in order[:120]}
    assert seq.settled(kept)
    checks = seq.summary(kept)["checks"]
    assert [c["status"] for c in checks] == ["pass", "inconclusive", "inconclusive"]


@pytest.mark.parametrize("where", ["baseline", "candidate"])
def test_a_value_out_of_range_names_the_run_that_holds_it(where):
    gates = _gates({"metric": "faithfulness", "rule": "non_inferior", "margin": 0.05})
    (check,) = checks_of(gates, [])
    good, bad = _rows([1.0, 1.0]), _rows([1.0, float("nan")])
    base, cand = (bad, good) if where == "baseline" else (good, bad)
    with pytest.raises(UserError) as e:
        settle_checks([check], list(good), cand, base, ALPHA, "runs/base",
                      cand_source="runs/cand")
    assert e.value.file == f"runs/{where[:4]}" and e.value.case_id == "c0001"
    assert str(e.value).endswith(f"case c0001: sequential decisions need metrics in [0, 1]; "
                                 f"the {where}'s faithfulness is nan")


NOT_WORSE_FAMILY = _gates(
    {"metric": "faithfulness", "rule": "not_worse", "margin": 0.05, "slices": "critical"},
    {"metric": "correctness", "rule": "not_worse", "margin": 0.05},
    critical_slices=[{"key": "intent", "value": "api"}])


def _family_false_fails(n: int, runs: int, seed: int) -> np.ndarray:
    """Per-run, per-check false fails of the three not_worse checks of NOT_WORSE_FAMILY
    (overall, on a third of the cases, and a second metric; each sharing alpha / 3) at a
    true change of exactly minus the margin on both metrics (10% lost, 5% gained), looked
    at after every case with the tuned bets."""
    rng = np.random.default_rng(seed)
    tags = [{"intent": "api" if i % 3 == 0 else "other"} for i in range(n)]
    out = np.zeros((runs, 3), dtype=bool)
    for k in range(runs):
        d = rng.choice([-0.5, 0.0, 0.5], size=(2, n), p=[0.10, 0.85, 0.05])
        base = _rows([0.5] * n, tags=tags)
        cand = _rows(0.5 + d[0], tags=tags)
        for i, cid in enumerate(base):
            base[cid]["metrics"]["correctness"] = 0.5
            cand[cid]["metrics"]["correctness"] = 0.5 + d[1, i]
        checks = checks_of(NOT_WORSE_FAMILY, base.values())
        order = list(base)
        targets = [bet_target(c, order, base) for c in checks]
        got = settle_checks(checks, order, cand, base, ALPHA, "b", targets=targets)
        out[k] = [s.status == "fail" for s in got]
    return out


def test_not_worse_checks_share_alpha_quick():
    assert [c.share for c in checks_of(NOT_WORSE_FAMILY, [])] == [1 / 3] * 3
    assert _family_false_fails(100, 150, seed=7).any(axis=1).mean() <= ALPHA


@pytest.mark.slow
@pytest.mark.parametrize("n", [30, 100, 300])
def test_not_worse_family_false_fail_rate(n):
    """4000 runs each: each check fails falsely at most its share of alpha, halved (the
    side of the two-sided sequence it reads), and the family at most alpha / 2 (each plus
    three simulation errors). (Measured: no false fail at all; the sequence is that far
    from its level at the margin.)"""
    fails = _family_false_fails(n, 4000, seed=n)
    share = ALPHA / 3 / 2
    assert (fails.mean(axis=0) <= share + 3 * math.sqrt(share * (1 - share) / 4000)).all()
    assert fails.any(axis=1).mean() <= ALPHA / 2 + 3 * math.sqrt(0.025 * 0.975 / 4000)


def test_a_mean_checks_bet_target_reads_no_baseline_value():
    # a bound on the candidate's mean bets on the candidate's values alone: its target
    # counts the slice's cases, not those where the baseline has the metric (which, being
    # the same cases' other run, says something about cases not yet run)
    base = _rows([None if i % 10 == 9 else 0.0 for i in range(100)],
                 metric="false_answer_rate")
    gates = _gates({"metric": "false_answer_rate", "rule": "bound", "max": 0.2,
                    "max_increase": 0.05, "by": "interval"})
    delta, mean = checks_of(gates, base.values())
    assert (delta.kind, mean.kind) == ("delta", "mean")
    assert bet_target(delta, list(base), base) == 45.0
    assert bet_target(mean, list(base), base) == 50.0


def test_when_no_check_can_move_the_run_takes_every_case():
    from types import SimpleNamespace

    from raglab.sequential.run import Sequential

    base = _rows([1.0] * 200, weights=[0.0] * 200)
    gates = _gates({"metric": "faithfulness", "rule": "non_inferior", "margin": 0.05})
    seq = Sequential(SimpleNamespace(seed=0, batch=20, against="base"), gates, "g",
                     SimpleNamespace(records=list(base.values()), by_id=lambda: base,
                                     run_dir="base"))
    order = seq.arrange(list(base))
    assert not seq.settled({cid: base[cid] for cid in order[:120]})
    assert seq.summary({cid: base[cid] for cid in order})["stopped_because"] == "every case run"
