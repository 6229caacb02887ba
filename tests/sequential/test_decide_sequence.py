"""``raglab decide``'s checks on a sequential run (raglab.sequential.decide): interval
checks read the confidence sequence; a failure that does not rest on the interval stays."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from raglab.compare.gates import GateSet
from raglab.errors import UserError
from raglab.sequential.decide import on_sequence, words

GATES = GateSet.model_validate({"gates": [
    {"metric": "faithfulness", "rule": "non_inferior", "margin": 0.05},
    {"metric": "false_answer_rate", "rule": "bound", "max": 0.5, "max_increase": 0.05,
     "by": "interval"}]})


def _run(n: int, m: float, r: float, summary=None):
    rows = [{"case_id": f"c{i:03d}", "tags": {}, "gold": {"answerable": True},
             "metrics": {"faithfulness": m, "false_answer_rate": r}} for i in range(n)]
    by = {x["case_id"]: x for x in rows}
    return SimpleNamespace(records=rows, by_id=lambda: by, run_dir="base",
                           metrics={"sequential": summary} if summary else {})


def _result(index: int, status: str, reason: str, candidate: float, n: int = 100):
    return {"index": index, "slice": None, "status": status, "reason": reason,
            "candidate": candidate, "n": n}


SUMMARY = {"cases_run": 100, "cases_total": 300, "stopped_because": "every check settled",
           "gates": "g", "seed": 0}


def test_interval_checks_read_the_sequence_and_the_record_says_settled_after():
    base, cand = _run(300, 1.0, 0.0), _run(100, 1.0, 0.0, SUMMARY)
    results = [_result(0, "inconclusive", "CI ...", 1.0), _result(1, "inconclusive", "", 0.0)]
    line = on_sequence(results, GATES, base, cand)
    assert "settled after 100 of 300 cases" in line
    assert [r["status"] for r in results] == ["pass", "pass"]
    assert "pass settled after 96 of 100 paired cases" in results[0]["reason"]
    assert results[0]["ci_low"] < -0.05 + 0.03


def test_a_bound_on_the_mean_reads_its_own_sequence_and_not_comparable_stays():
    base, cand = _run(300, 1.0, 0.6), _run(100, 1.0, 0.6, SUMMARY)
    results = [_result(0, "fail", "not comparable (metric versions differ)", 1.0),
               _result(1, "fail", "candidate 0.6 > 0.5", 0.6)]
    on_sequence(results, GATES, base, cand)
    assert [r["status"] for r in results] == ["fail", "fail"]
    assert results[0]["reason"] == "not comparable (metric versions differ)"
    # the rise by interval passes, the mean's sequence lies wholly above max 0.5
    reason = results[1]["reason"]
    assert "confidence sequence of the candidate's mean" in reason
    assert "fail settled after" in reason and "pass settled after 96" in reason


NOT_WORSE = GateSet.model_validate({"gates": [
    {"metric": "faithfulness", "rule": "not_worse"},
    {"metric": "faithfulness", "rule": "not_worse", "margin": 0.05}]})


def test_not_worse_fails_on_the_sequence_and_an_open_one_is_not_shown_worse():
    base = _run(300, 1.0, 0.0)
    # identical: margin 0 is never settled (the sequence keeps 0): not shown worse; margin
    # 0.05 passes once the sequence lies above -0.05, at Bonferroni alpha / 2: K+ reaches
    # 2 / (alpha / 2) = 80 after ceil(log 80 / log(1 + 0.75 * 0.025 / 0.475)) = 114 cases
    cand = _run(150, 1.0, 0.0, SUMMARY)
    results = [_result(0, "pass", "", 1.0), _result(1, "pass", "", 1.0)]
    on_sequence(results, NOT_WORSE, base, cand)
    assert [r["status"] for r in results] == ["pass", "pass"]
    assert "does not show it worse" in results[0]["reason"]
    assert "pass settled after 114 of 150" in results[1]["reason"]
    # every case lost: shown worse
    lost = _run(100, 0.0, 0.0, SUMMARY)
    results = [_result(0, "pass", "", 0.0), _result(1, "pass", "", 0.0)]
    on_sequence(results, NOT_WORSE, base, lost)
    assert [r["status"] for r in results] == ["fail", "fail"]


def test_words_of_a_run_that_was_not_settled():
    assert words({"cases_run": 300, "cases_total": 300, "stopped_because": "every case run"}
                 ) == "not settled before every case was run (300 of 300 cases)"


def test_decide_tunes_the_bets_as_the_run_recorded_them():
    # 30 of 300 cases lost: the bets tuned to 150 (as the run recorded) show the breach
    # at case 218; the untuned bets (a summary without bet_target) never do
    lost = np.random.default_rng(0).permutation(np.r_[np.ones(30), np.zeros(270)])
    base = _run(300, 1.0, 0.0)
    rows = [{**r, "metrics": {"faithfulness": 1.0 - lost[i], "false_answer_rate": 0.0}}
            for i, r in enumerate(base.records)]
    by = {x["case_id"]: x for x in rows}
    summary = {**SUMMARY, "cases_run": 300, "stopped_because": "every case run"}
    tuned = {**summary, "checks": [{"index": 0, "on": "delta", "slice": None,
                                    "bet_target": 150.0}]}
    gates = GateSet.model_validate({"gates": [GATES.gates[0].model_dump()]})
    out = {}
    for name, s in (("tuned", tuned), ("untuned", summary)):
        cand = SimpleNamespace(records=rows, by_id=lambda: by, run_dir="cand",
                               metrics={"sequential": s})
        results = [_result(0, "fail", "CI ...", 0.9, n=300)]
        on_sequence(results, gates, base, cand)
        out[name] = results[0]
    assert out["tuned"]["status"] == "fail"
    assert "fail settled after 218 of 300 paired cases" in out["tuned"]["reason"]
    assert out["untuned"]["status"] == "inconclusive"


def test_decide_weighs_the_cases_as_the_baseline_does():
    # 60 of 300 cases lost, each weighing 0 in the baseline (the rest weigh 2): the
    # weighted mean difference is 0 and the check passes; unweighted, the loss is shown
    lost = np.random.default_rng(1).permutation(np.r_[np.ones(60), np.zeros(240)])
    base = _run(300, 1.0, 0.0)
    out = {}
    for name, weighted in (("weighted", True), ("unweighted", False)):
        brows = [{**r, "weight": 0.0 if lost[i] else 2.0} if weighted else r
                 for i, r in enumerate(base.records)]
        bby = {x["case_id"]: x for x in brows}
        b = SimpleNamespace(records=brows, by_id=lambda bby=bby: bby, run_dir="base")
        rows = [{**r, "metrics": {"faithfulness": 1.0 - lost[i], "false_answer_rate": 0.0}}
                for i, r in enumerate(base.records)]
        by = {x["case_id"]: x for x in rows}
        cand = SimpleNamespace(records=rows, by_id=lambda by=by: by, run_dir="cand",
                               metrics={"sequential": SUMMARY})
        results = [_result(0, "inconclusive", "CI ...", 0.8, n=300)]
        on_sequence(results, GATES, b, cand)
        out[name] = results[0]["status"]
    assert out == {"weighted": "pass", "unweighted": "fail"}


def test_a_gate_a_sequence_cannot_read_is_refused_naming_it():
    gates = GateSet.model_validate({"gates": [
        {"metric": "faithfulness", "rule": "non_inferior", "margin": 0.05},
        {"metric": "latency_ms.total", "rule": "bound", "max_increase": 50,
         "by": "interval"}]})
    with pytest.raises(UserError, match=r"^gates=mine: gate 2 \(latency_ms.total bound\) "
                                        r"reads latency_ms.total, whose values are not in"):
        on_sequence([], gates, _run(10, 1.0, 0.0), _run(10, 1.0, 0.0, SUMMARY),
                    "gates=mine")


def test_a_budget_keeps_its_reading_on_the_cases_run_and_says_so():
    gates = GateSet.model_validate({"gates": [
        {"metric": "faithfulness", "rule": "non_inferior", "margin": 0.05},
        {"metric": "latency_ms.total", "rule": "bound", "max": 2000}]})
    base, cand = _run(300, 1.0, 0.0), _run(100, 1.0, 0.0, SUMMARY)
    results = [_result(0, "inconclusive", "CI ...", 1.0),
               _result(1, "fail", "candidate 2400 > 2000", 2400.0)]
    on_sequence(results, gates, base, cand)
    assert [r["status"] for r in results] == ["pass", "fail"]
    assert results[1]["reason"] == ("candidate 2400 > 2000 (a budget: the mean of the 100 "
                                    "cases run; it holds no sequential run back)")


def _sequential_run(gates: GateSet, base, ids):
    from raglab.sequential.run import Sequential

    cfg = SimpleNamespace(seed=3, batch=20, against="base")
    seq = Sequential(cfg, gates, "g", SimpleNamespace(records=base.records, by_id=base.by_id,
                                                      run_dir="base"))
    return seq, seq.arrange(ids)


def test_decide_reads_the_sequence_the_run_settled_after_a_resume():
    # a resume re-runs the cases whose records failed: records.jsonl then holds them after
    # the cases that followed them in the seeded order; the run and decide read one order
    lost = np.random.default_rng(2).permutation(np.r_[np.ones(60), np.zeros(240)])
    base = _run(300, 1.0, 0.0)
    rows = {r["case_id"]: {**r, "metrics": {"faithfulness": 1.0 - lost[i],
                                            "false_answer_rate": 0.0}}
            for i, r in enumerate(base.records)}
    gates = GateSet.model_validate({"gates": [GATES.gates[0].model_dump()]})
    seq, order = _sequential_run(gates, base, list(rows))
    ran = order[:40]
    recorded = ran[5:] + ran[:5]          # the first five failed, ran again on resume
    kept = {cid: rows[cid] for cid in recorded}
    summary = seq.summary(kept)
    cand = SimpleNamespace(records=[kept[c] for c in recorded], by_id=lambda: kept,
                           run_dir="cand", metrics={"sequential": summary})
    results = [_result(0, "inconclusive", "CI ...", 0.9, n=40)]
    on_sequence(results, gates, base, cand)
    (check,) = summary["checks"]
    assert (results[0]["ci_low"], results[0]["ci_high"]) == (check["cs_low"], check["cs_high"])
    assert (check["cs_low"], check["cs_high"]) == pytest.approx((-0.248, 0.064))


def test_decide_says_when_the_baseline_is_not_the_one_the_run_settled_on():
    base = _run(300, 1.0, 0.0)
    gates = GateSet.model_validate({"gates": [GATES.gates[0].model_dump()]})
    seq, order = _sequential_run(gates, base, [r["case_id"] for r in base.records])
    kept = {cid: base.by_id()[cid] for cid in order[:100]}
    summary = seq.summary(kept)
    cand = SimpleNamespace(records=list(kept.values()), by_id=lambda: kept, run_dir="cand",
                           metrics={"sequential": summary})
    same = on_sequence([_result(0, "inconclusive", "CI ...", 1.0)], gates, base, cand)
    assert "baseline" not in same
    rerun = _run(300, 1.0, 0.0)          # the baseline run again: one case's value changed
    rerun.records[7]["metrics"]["faithfulness"] = 0.0
    other = on_sequence([_result(0, "inconclusive", "CI ...", 1.0)], gates, rerun, cand)
    assert "the baseline's records differ from those the run settled on" in other


def test_a_check_the_run_did_not_settle_gets_no_other_gates_target():
    # the run's gate 0 was on correctness; decide's gate 0 is on faithfulness: the
    # recorded target is not its, and the record says so
    base, cand = _run(300, 1.0, 0.0), _run(100, 1.0, 0.0)
    summary = {**SUMMARY, "checks": [{"index": 0, "on": "delta", "slice": None,
                                      "metric": "correctness", "bet_target": 3.0}]}
    cand.metrics = {"sequential": summary}
    gates = GateSet.model_validate({"gates": [GATES.gates[0].model_dump()]})
    results = [_result(0, "inconclusive", "CI ...", 1.0)]
    from raglab.sequential.decide import _targets
    from raglab.sequential.run import checks_of

    assert _targets(checks_of(gates, base.records), summary) == [None]
    line = on_sequence(results, gates, base, cand)
    assert "1 of its checks the run did not settle" in line


def test_underpowered_fail_holds_on_a_sequential_run_as_on_a_fixed_n_one():
    # before: the sequence's pass replaced the fixed-n rule's "underpowered: ..." fail, so
    # a gate set with underpowered: fail gave GO on a sequential run (demo: identical
    # outputs, margin 0.05 below the MDE 0.0798 of the 96 paired cases) and NO-GO on the
    # full run of the same candidate
    gates = GateSet.model_validate({"underpowered": "fail",
                                    "gates": [GATES.gates[0].model_dump()]})
    base, cand = _run(300, 1.0, 0.0), _run(100, 1.0, 0.0, SUMMARY)
    why = "its margin 0.05 is below the minimum detectable effect 0.0798 (80% power)"
    under = {**_result(0, "fail", "underpowered: margin 0.05 below ...", 1.0),
             "underpowered": True, "underpowered_why": why}
    results = [under]
    on_sequence(results, gates, base, cand)
    assert results[0]["status"] == "fail"
    assert results[0]["reason"].startswith(f"underpowered: {why} (confidence sequence")
    assert "pass settled after 96 of 100 paired cases" in results[0]["reason"]
    # with underpowered: warn (the default) the same check passes
    warned = [{**under, "status": "pass", "reason": "CI ..."}]
    on_sequence(warned, GateSet.model_validate({"gates": [GATES.gates[0].model_dump()]}),
                base, cand)
    assert warned[0]["status"] == "pass"


def test_another_gate_set_at_decide_does_not_say_the_baseline_differs():
    # before: the digest was taken over decide's gate metrics, not the run's, so a decision
    # with another gate set (demo: the run on faithfulness, decide gates=default) said "the
    # baseline's records differ from those the run settled on" of the very same baseline
    base = _run(300, 1.0, 0.0)
    gates = GateSet.model_validate({"gates": [GATES.gates[0].model_dump()]})
    seq, order = _sequential_run(gates, base, [r["case_id"] for r in base.records])
    kept = {cid: base.by_id()[cid] for cid in order[:100]}
    cand = SimpleNamespace(records=list(kept.values()), by_id=lambda: kept, run_dir="cand",
                           metrics={"sequential": seq.summary(kept)})
    results = [_result(0, "inconclusive", "CI ...", 1.0), _result(1, "inconclusive", "", 0.0)]
    line = on_sequence(results, GATES, base, cand)   # gate 1's two checks: not the run's
    assert "2 of its checks the run did not settle" in line
    assert "baseline's records differ" not in line
    rerun = _run(300, 1.0, 0.0)          # a change in what the run's checks read still shows
    rerun.records[7]["metrics"]["faithfulness"] = 0.0
    results = [_result(0, "inconclusive", "CI ...", 1.0), _result(1, "inconclusive", "", 0.0)]
    assert "baseline's records differ" in on_sequence(results, GATES, rerun, cand)


def test_an_underpowered_pass_of_the_sequence_is_not_called_a_lucky_fixed_n_pass(tmp_path):
    """A sequential run stops once its checks settle, so its cases are few for a fixed-n
    test: the record says the sequence passed it, valid at any stop. It said "with no
    true change a pass was less than 80% likely on these cases", a test not used."""
    from raglab.compare.comparison import Comparison, RunSource
    from raglab.compare.gates import ANYTIME
    from raglab.compare.record import build_record

    def src(label):
        return RunSource(label, tmp_path / label, label, {"k": 3},
                         {"dataset": {}, "n_cases": 100, "errors": 0,
                          "metric_versions": {}}, [])

    gates = GateSet.model_validate({"gates": [GATES.gates[0].model_dump()]})
    comp = Comparison(src("b"), src("c"), [], {}, {}, {}, [], {})
    why = "its margin 0.05 is below the minimum detectable effect 0.0798 (80% power)"
    base = {**_result(0, "pass", "CI ...", 1.0), "gate": "faithfulness non_inferior",
            "rule": "non_inferior", "underpowered": True, "underpowered_why": why}
    fixed = build_record(comp, gates, "g", "g.yaml", [base], name="g", date="2026-01-02",
                         question=None)["warnings"]
    assert any("a pass was less than 80% likely" in w for w in fixed)
    settled = {**base, "reason": f"pass settled after 96 of 100 paired cases {ANYTIME}"}
    warned = build_record(comp, gates, "g", "g.yaml", [settled], name="g", date="2026-01-02",
                          question=None)["warnings"]
    (w,) = [w for w in warned if "underpowered" in w]
    assert w == (f"faithfulness non_inferior [overall] is underpowered: {why}; its confidence "
                 "sequence passed it, valid at any stop (the power figure is a fixed-n "
                 "test's on the cases run)")
