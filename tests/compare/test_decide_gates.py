"""Gate evaluation on hand-built comparison rows: every rule passing and failing, margins at
their boundary, n/a and required gates, critical slices, the gates schema and its loading."""

import pytest

from raglab.commands.common import conf_dir
from raglab.compare.decide import FAIL, GO, NA, NO_GO, PASS, decision_of, evaluate_gates, run_means
from raglab.compare.gates import (
    INCONCLUSIVE,
    INCONCLUSIVE_DECISION,
    GateSet,
    load_gate_set,
    parse_gate_set,
)
from raglab.errors import UserError


def row(metric, slice=None, baseline=0.8, candidate=0.8, delta=0.0, ci=(-0.01, 0.01),
        p=1.0, p_adj=1.0, n=100, comparable=True):
    return {"metric": metric,
            "slice": None if slice is None else {"key": slice[0], "value": slice[1]},
            "baseline": baseline, "candidate": candidate, "delta": delta, "ci_low": ci[0],
            "ci_high": ci[1], "p_value": p, "p_adjusted": p_adj, "n": n, "wins": 0, "ties": n,
            "losses": 0, "comparable": comparable}


def gates(*gate_list, critical=()):
    return GateSet.model_validate({"gates": list(gate_list), "critical_slices": list(critical)})


def status(rows, *gate_list, critical=(), means=None):
    return [r["status"] for r in evaluate_gates(rows, gates(*gate_list, critical=critical), means)]


NI = {"metric": "vital_nugget_recall", "rule": "non_inferior", "margin": 0.02}


@pytest.mark.parametrize("ci_low,expected", [
    (0.01, PASS), (-0.0199, PASS), (-0.02, INCONCLUSIVE), (-0.0201, INCONCLUSIVE),
    (-0.5, INCONCLUSIVE)])
def test_non_inferiority_higher_is_better_at_the_margin(ci_low, expected):
    assert status([row("vital_nugget_recall", ci=(ci_low, 0.1))], NI) == [expected]


@pytest.mark.parametrize("ci,expected", [
    ((-0.5, -0.0201), FAIL), ((-0.5, -0.02), INCONCLUSIVE), ((-0.5, 0.1), INCONCLUSIVE),
    ((-0.0199, 0.1), PASS)])
def test_non_inferiority_fails_only_when_the_whole_interval_is_beyond_the_margin(ci, expected):
    assert status([row("vital_nugget_recall", delta=sum(ci) / 2, ci=ci)], NI) == [expected]


@pytest.mark.parametrize("ci_high,expected", [(0.0199, PASS), (0.02, INCONCLUSIVE),
                                              (0.3, INCONCLUSIVE)])
def test_non_inferiority_lower_is_better_reads_the_upper_bound(ci_high, expected):
    g = {"metric": "contradicted_claim_rate", "rule": "non_inferior", "margin": 0.02}
    # a lower bound far below zero is an improvement, never a failure
    assert status([row("contradicted_claim_rate", ci=(-0.5, ci_high))], g) == [expected]
    # the whole interval above the margin: the rise is shown
    assert status([row("contradicted_claim_rate", delta=0.1, ci=(0.0201, 0.2))], g) == [FAIL]


def test_non_inferiority_with_zero_margin_needs_a_positive_lower_bound():
    g = {**NI, "margin": 0}
    assert status([row("vital_nugget_recall", ci=(0.0, 0.1))], g) == [INCONCLUSIVE]
    assert status([row("vital_nugget_recall", ci=(0.001, 0.1))], g) == [PASS]
    assert status([row("vital_nugget_recall", ci=(-0.1, -0.001))], g) == [FAIL]


def test_an_inconclusive_check_says_how_many_cases_would_settle_it():
    # 0 changes of 23 pass/fail cases: the interval +-0.15; at 74 cases +-0.04996
    r = {**row("false_refusal_rate", n=23, ci=(-0.1431, 0.1431)), "ties": 23}
    g = {"metric": "false_refusal_rate", "rule": "non_inferior", "margin": 0.05}
    (res,) = evaluate_gates([r], gates(g))
    assert res["status"] == INCONCLUSIVE
    assert res["cases_needed"] == 74 and res["settles_as"] == PASS
    assert "74 paired cases would settle it (pass)" in res["reason"]
    # an estimate on the threshold is never settled by more of the same
    on = {**r, "n": 20, "delta": 0.05, "ci_low": -0.03, "ci_high": 0.24, "wins": 0,
          "losses": 1, "ties": 19}   # 1 case worse of 20: a rise of exactly the margin
    (res,) = evaluate_gates([on], gates(g))
    assert res["status"] == INCONCLUSIVE and res["cases_needed"] is None


def test_not_worse_reads_one_sided_tests_adjusted_together():
    g = {"metric": "contradicted_claim_rate", "rule": "not_worse"}
    m = "contradicted_claim_rate"
    # from rows alone (margin 0): half the two-sided p on the bad side, 1 - p/2 otherwise;
    # failed below half the level (0.025), each side's level of the 95% interval
    assert status([row(m, delta=0.05, p=0.045)], g) == [FAIL]      # one-sided 0.0225
    assert status([row(m, delta=0.05, p=0.09)], g) == [PASS]      # one-sided 0.045
    assert status([row(m, delta=-0.05, p=0.001)], g) == [PASS]    # it improved
    assert status([row(m, delta=0.05, p=None)], g) == [FAIL]      # no test
    # the comparison's own adjustment (a family of hundreds of rows) plays no part
    assert status([row(m, delta=0.05, p=0.01, p_adj=1.0)], g) == [FAIL]
    # given one-sided p-values, Holm over the gate set's not_worse checks
    two = gates(g, {"metric": "faithfulness", "rule": "not_worse"})
    rows = [row(m, delta=0.05), row("faithfulness", delta=-0.05)]
    res = evaluate_gates(rows, two, one_sided={(0, None): 0.02, (1, None): 0.015})
    # Holm: 2 x 0.015 = 0.03, then max(0.03, 0.02): each alone would fail at 0.025
    assert [r["status"] for r in res] == [PASS, PASS]
    assert [r["p_one_sided_adjusted"] for r in res] == [pytest.approx(0.03),
                                                        pytest.approx(0.03)]
    assert all(r.get("cases_needed") is None for r in res)   # never inconclusive
    res = evaluate_gates(rows, two, one_sided={(0, None): 0.01, (1, None): 0.2})
    assert [r["status"] for r in res] == [FAIL, PASS]
    assert "worse" in res[0]["reason"] and res[0]["p_one_sided"] == 0.01


def test_confidence_sets_the_significance_level():
    g = GateSet.model_validate({"confidence": 0.99, "gates": [
        {"metric": "faithfulness", "rule": "not_worse"}]})
    assert g.alpha == 0.01
    assert evaluate_gates([row("faithfulness", delta=-0.1, p=0.02)], g)[0]["status"] == PASS
    assert evaluate_gates([row("faithfulness", delta=-0.1, p=0.009)], g)[0]["status"] == FAIL


def test_bound_by_interval_reads_the_interval():
    g = {"metric": "false_refusal_rate", "rule": "bound", "max_increase": 0.05,
         "by": "interval"}
    assert status([row("false_refusal_rate", delta=0.01, ci=(-0.02, 0.04))], g) == [PASS]
    assert status([row("false_refusal_rate", delta=0.01, ci=(-0.02, 0.06))], g) == \
        [INCONCLUSIVE]
    assert status([row("false_refusal_rate", delta=0.1, ci=(0.06, 0.14))], g) == [FAIL]
    est = {**g, "by": "estimate"}
    assert status([row("false_refusal_rate", delta=0.01, ci=(-0.02, 0.06))], est) == [PASS]
    down = {"metric": "faithfulness", "rule": "bound", "max_decrease": 0.02, "by": "interval"}
    assert status([row("faithfulness", delta=0.0, ci=(-0.03, 0.03))], down) == [INCONCLUSIVE]
    assert status([row("faithfulness", delta=-0.1, ci=(-0.13, -0.03))], down) == [FAIL]
    assert status([row("faithfulness", delta=0.0, ci=(-0.01, 0.03))], down) == [PASS]


def test_underpowered_non_inferiority_warns_or_fails():
    r = {**row("vital_nugget_recall", ci=(-0.01, 0.01)), "mde": 0.05}
    warn = evaluate_gates([r], gates(NI))[0]
    assert warn["status"] == PASS and warn["underpowered"] is True and warn["mde"] == 0.05
    assert "underpowered" in warn["reason"]
    strict = GateSet.model_validate({"gates": [NI], "underpowered": "fail"})
    assert evaluate_gates([r], strict)[0]["status"] == FAIL
    enough = {**r, "mde": 0.01}
    assert evaluate_gates([enough], strict)[0]["status"] == PASS


def test_bounds_on_the_value_and_on_the_change():
    acl = {"metric": "acl_leak_rate", "rule": "bound", "max": 0}
    assert status([row("acl_leak_rate", candidate=0.0)], acl) == [PASS]
    assert status([row("acl_leak_rate", candidate=0.004)], acl) == [FAIL]
    fr = {"metric": "false_refusal_rate", "rule": "bound", "max": 0.2, "max_increase": 0.05}
    assert status([row("false_refusal_rate", candidate=0.2, delta=0.05)], fr) == [PASS]
    assert status([row("false_refusal_rate", candidate=0.21, delta=0.0)], fr) == [FAIL]
    assert status([row("false_refusal_rate", candidate=0.1, delta=0.0501)], fr) == [FAIL]
    low = {"metric": "correctness", "rule": "bound", "min": 0.7, "max_decrease": 0.1}
    assert status([row("correctness", candidate=0.7, delta=-0.1)], low) == [PASS]
    assert status([row("correctness", candidate=0.69, delta=0.0)], low) == [FAIL]
    assert status([row("correctness", candidate=0.9, delta=-0.11)], low) == [FAIL]


def test_latency_and_cost_budgets():
    lat = {"metric": "latency_ms.total", "rule": "bound", "max": 2000}
    cost = {"metric": "cost_usd_per_query", "rule": "bound", "max": 0.01}
    rows = [row("latency_ms.total", candidate=1999.0, delta=400.0),
            row("cost_usd_per_query", candidate=0.011, delta=0.0)]
    res = evaluate_gates(rows, gates(lat, cost))
    assert [r["status"] for r in res] == [PASS, FAIL]
    assert res[1]["reason"] == "candidate 0.011 > 0.01"
    assert res[0]["requirement"] == "candidate <= 2000"


def test_missing_metrics_are_na_unless_required_and_one_sided_metrics_fail():
    cost = {"metric": "cost_usd_per_query", "rule": "bound", "max": 0.01}
    assert status([], cost) == [NA]  # the system reports no cost
    assert status([row("cost_usd_per_query", baseline=None, candidate=None, delta=None,
                       ci=(None, None), p=None, p_adj=None, n=0)], cost) == [NA]
    assert status([], {**cost, "required": True}) == [FAIL]
    # faithfulness applies in the candidate only (the baseline abstained everywhere)
    empty = row("faithfulness", baseline=None, candidate=None, delta=None, ci=(None, None),
                p=None, p_adj=None, n=0)
    g = {"metric": "faithfulness", "rule": "non_inferior", "margin": 0.1}
    assert status([empty], g, means={("faithfulness", None): (None, 0.9)}) == [FAIL]
    assert status([empty], g, means={("faithfulness", None): (None, None)}) == [NA]
    # a value bound on an unpaired metric reads the candidate's own mean
    acl = {"metric": "acl_leak_rate", "rule": "bound", "max": 0}
    assert status([], acl, means={("acl_leak_rate", None): (None, 0.5)}) == [FAIL]
    assert status([], acl, means={("acl_leak_rate", None): (None, 0.0)}) == [PASS]


def test_rows_not_comparable_fail():
    assert status([row("vital_nugget_recall", comparable=False, ci=(0.1, 0.2))], NI) == [FAIL]


def test_critical_slices_overall_always_and_key_expansion():
    rows = [row("vital_nugget_recall"),
            row("vital_nugget_recall", ("intent", "billing"), ci=(-0.3, 0.1)),
            row("vital_nugget_recall", ("intent", "tax")),
            row("vital_nugget_recall", ("answerable", "yes")),
            row("faithfulness", ("intent", "billing"), ci=(-0.3, 0.1))]
    crit = [{"key": "answerable", "value": True}, {"key": "intent"},
            {"key": "region", "value": "EU"}]
    res = evaluate_gates(rows, gates({**NI, "slices": "critical"},
                                     {"metric": "faithfulness", "rule": "non_inferior",
                                      "margin": 0.02}, critical=crit))
    got = [(r["metric"], r["slice"] and (r["slice"]["key"], r["slice"]["value"]), r["status"])
           for r in res]
    assert got == [
        ("vital_nugget_recall", None, PASS),
        ("vital_nugget_recall", ("answerable", "yes"), PASS),
        ("vital_nugget_recall", ("intent", "billing"), INCONCLUSIVE),
        ("vital_nugget_recall", ("intent", "tax"), PASS),
        ("vital_nugget_recall", ("region", "EU"), NA),  # no such slice: shown, not blocking
        ("faithfulness", None, NA),  # overall only (not reported here), slices not checked
    ]
    assert res[2]["ci_low"] == -0.3 and res[2]["requirement"] == "CI low > -0.02"


def test_decision():
    assert decision_of([{"status": PASS}, {"status": NA}]) == GO
    assert decision_of([{"status": PASS}, {"status": FAIL}]) == NO_GO
    assert decision_of([{"status": NA}]) == NO_GO  # nothing was shown
    assert decision_of([]) == NO_GO
    assert decision_of([{"status": PASS}, {"status": INCONCLUSIVE}]) == INCONCLUSIVE_DECISION
    assert decision_of([{"status": INCONCLUSIVE}, {"status": FAIL}]) == NO_GO
    assert decision_of([{"status": INCONCLUSIVE}, {"status": NA}]) == INCONCLUSIVE_DECISION


def test_run_means_reads_both_runs_metrics_json():
    b = {"overall": {"faithfulness": None}, "slices": {"intent": {"x": {"faithfulness": 0.5}}}}
    c = {"overall": {"faithfulness": 0.9}}
    m = run_means(b, c)
    assert m[("faithfulness", None)] == (None, 0.9)
    assert m[("faithfulness", ("intent", "x"))] == (0.5, None)


@pytest.mark.parametrize("gate,message", [
    ({"metric": "faithfullness", "rule": "bound", "max": 1},
     "gates[0].metric: unknown metric 'faithfullness'"),
    ({"metric": "faithfulness", "rule": "non_inferior"}, "needs a margin"),
    ({"metric": "faithfulness", "rule": "bound"}, "needs at least one of max, min"),
    ({"metric": "faithfulness", "rule": "bound", "max": 1, "margin": 0.1},
     "margin applies to rules"),
    ({"metric": "faithfulness", "rule": "bound", "max": 1, "by": "interval"},
     "by: interval applies"),
    ({"metric": "faithfulness", "rule": "not_worse", "max": 1}, "max applies to rule bound"),
    ({"metric": "final.context_tokens", "rule": "not_worse"}, "no better direction"),
    ({"metric": "faithfulness", "rule": "bound", "max": 1, "color": "red"},
     "gates[0].color: unknown key"),
    ({"metric": "faithfulness", "rule": "maybe"}, "gates[0].rule"),
    ({"metric": "final.mrr@5", "rule": "bound", "min": 0.1}, "unknown metric 'final.mrr@5'"),
    ({"metric": "faithfulness", "rule": "bound", "min": 0.9, "max": 0.8},
     "min 0.9 is above max 0.8: no value passes"),
])
def test_bad_gates_are_one_line_user_errors(gate, message):
    with pytest.raises(UserError) as e:
        parse_gate_set({"gates": [gate]}, "g.yaml")
    assert message in str(e.value) and str(e.value).startswith("g.yaml: ")
    assert "\n" not in str(e.value)


def test_metric_names_with_cutoffs_and_latency_stages_are_known():
    g = parse_gate_set({"gates": [
        {"metric": "final.evidence_recall@5", "rule": "non_inferior", "margin": 0.05},
        {"metric": "latency_ms.generate", "rule": "bound", "max": 900}]}, "g.yaml")
    assert [x.direction for x in g.gates] == ["higher", "lower"]
    with pytest.raises(UserError, match="gates: List should have at least 1 item"):
        parse_gate_set({"gates": []}, "g.yaml")


@pytest.mark.parametrize("name", sorted(p.stem for p in (conf_dir() / "gates").glob("*.yaml")))
def test_every_shipped_gate_set_loads(name):
    assert load_gate_set(name, [], conf_dir())[1].gates


def test_shipped_gate_sets_load_and_overrides_apply(tmp_path):
    name, g, source = load_gate_set("default", [], conf_dir())
    assert name == "default" and source.endswith("gates/default.yaml") and g.confidence == 0.95
    assert {x.metric for x in g.gates} >= {"vital_nugget_recall", "faithfulness",
                                          "acl_leak_rate", "contradicted_claim_rate",
                                          "false_refusal_rate", "false_answer_rate",
                                          "latency_ms.total", "cost_usd_per_query"}
    _, g2, _ = load_gate_set("default", ["gates.confidence=0.9"], conf_dir())
    assert g2.confidence == 0.9
    with pytest.raises(UserError, match=r"gates=nope: unknown gate set \(available: default"):
        load_gate_set("nope", [], conf_dir())
    f = tmp_path / "ci.yaml"
    f.write_text("gates:\n  - {metric: acl_leak_rate, rule: bound, max: 0}\n")
    name, g3, _ = load_gate_set(str(f), [], conf_dir())
    assert name == "ci" and g3.gates[0].max == 0
    _, g4, _ = load_gate_set(str(f), ["gates.confidence=0.8"], conf_dir())
    assert g4.confidence == 0.8
    with pytest.raises(UserError, match="no such gates file"):
        load_gate_set(str(tmp_path / "missing.yaml"), [], conf_dir())
    bad = tmp_path / "bad.yaml"
    bad.write_text("gates: [unclosed\n")
    with pytest.raises(UserError, match="bad.yaml"):
        load_gate_set(str(bad), [], conf_dir())


def test_record_of_runs_without_diagnoses_or_flips_renders(tmp_path):
    from raglab.compare.comparison import Comparison, RunSource
    from raglab.compare.record import build_record, render_record

    def src(label, cfg, ds):
        return RunSource(label, tmp_path / label, label, cfg,
                         {"dataset": ds, "n_cases": 2, "errors": 0,
                          "metric_versions": {"nuggets": "n1"}}, [])

    b = src("b", {"k": 3, "system": {"name": "reference"}}, {"cases_sha256": "c1"})
    c = src("c", {"k": 5, "system": {"name": "reference"}, "extra": None},
            {"cases_sha256": "c2"})
    comp = Comparison(b, c, [row("vital_nugget_recall", delta=-0.3, ci=(-0.5, -0.1))], {}, {},
                      {}, [], {})
    g = gates({**NI, "slices": "critical"}, critical=[{"key": "intent", "value": "x"}])
    res = evaluate_gates(comp.rows, g)
    rec = build_record(comp, g, "g", "g.yaml", res, name="g", date="2026-01-02",
                       question=None)
    assert rec["decision"] == NO_GO
    assert rec["counts"] == {PASS: 0, FAIL: 1, INCONCLUSIVE: 0, NA: 1}
    assert rec["config_diff"] == [{"key": "extra", "baseline": None, "candidate": "null"},
                                  {"key": "k", "baseline": "3", "candidate": "5"}]
    assert any("different cases files" in w for w in rec["warnings"])
    assert any("critical slice intent=x" in w for w in rec["warnings"])
    md = render_record(rec)
    assert md.startswith("# Decision: NO-GO (g, 2026-01-02)")
    assert "**Question.** (none given)" in md and "| extra | (absent) | null |" in md
    assert "(no case flipped on the headline metrics)" in md
    assert "| vital_nugget_recall non_inferior | overall | CI low > -0.02 |" in md
    # diagnosis versions: one warning, whether compare gave it already or not
    c.metrics["metric_versions"]["diagnosis"] = "d2"
    rec = build_record(comp, g, "g", "g.yaml", res, name="g", date="d", question="q")
    assert sum("diagnos" in w for w in rec["warnings"]) == 1
    comp.warnings.append("the runs were diagnosed under different thresholds (...)")
    rec = build_record(comp, g, "g", "g.yaml", res, name="g", date="d", question="q")
    assert sum("diagnos" in w for w in rec["warnings"]) == 1


def test_a_bound_on_a_change_knows_its_sample():
    fa = {"metric": "false_answer_rate", "rule": "bound", "max": 0.5, "max_increase": 0.05}
    small = {**row("false_answer_rate", candidate=0.17, delta=0.17, ci=(0.0, 1.0), n=6),
             "wins": 0, "ties": 5, "losses": 1}
    (check,) = evaluate_gates([small], gates(fa))
    assert check["status"] == FAIL and check["underpowered"] is True and check["n"] == 6
    assert "n 6 < min_n 30" in check["underpowered_why"]
    assert "interval [+0, +1] is wider than the bound's slack 0.05" in check["underpowered_why"]
    assert check["changed"] == 1
    from raglab.compare.decide import turns_on

    assert turns_on([check]) == {"changed": 1, "checks": [
        {"gate": "false_answer_rate bound", "slice": None, "changed": 1, "n": 6}]}
    # enough cases and a narrow interval: not underpowered
    big = row("false_answer_rate", candidate=0.2, delta=0.01, ci=(-0.01, 0.03), n=400)
    (ok,) = evaluate_gates([big], gates(fa))
    assert ok["status"] == PASS and ok["underpowered"] is False and ok["underpowered_why"] is None
    # a ceiling alone (no change bounded) is judged by n only
    acl = {"metric": "acl_leak_rate", "rule": "bound", "max": 0}
    (few,) = evaluate_gates([row("acl_leak_rate", candidate=0.0, n=10)], gates(acl))
    assert few["status"] == PASS and few["underpowered"] is True
    strict = GateSet.model_validate({"gates": [acl], "underpowered": "fail", "min_n": 5})
    assert evaluate_gates([row("acl_leak_rate", candidate=0.0, n=10)], strict)[0]["status"] \
        == PASS
    strict = GateSet.model_validate({"gates": [acl], "underpowered": "fail"})
    assert evaluate_gates([row("acl_leak_rate", candidate=0.0, n=10)], strict)[0]["status"] \
        == FAIL


def test_a_no_go_on_many_changed_cases_does_not_turn_on_a_handful():
    from raglab.compare.decide import turns_on

    fa = {"metric": "false_answer_rate", "rule": "bound", "max": 0.5, "max_increase": 0.05}
    r = {**row("false_answer_rate", candidate=0.3, delta=0.2, ci=(0.1, 0.3), n=100),
         "wins": 0, "ties": 80, "losses": 20}
    (check,) = evaluate_gates([r], gates(fa))
    assert check["status"] == FAIL and turns_on([check]) is None


def test_data_file_warnings_need_both_hashes():
    """A run that records no hash (unfinished: no metrics.json) is not a different file:
    a sequential run against such a baseline warned 'None and 1feddbf6906e'."""
    from raglab.compare.table import dataset_warnings

    a, b = {"cases_sha256": "a" * 64, "corpus_sha256": "c" * 64}, {"cases_sha256": "b" * 64}
    assert dataset_warnings({}, a) == [] and dataset_warnings(a, dict(a)) == []
    assert dataset_warnings(a, b) == [f"the runs used different cases files ({'a' * 12} and "
                                      f"{'b' * 12})"]
    assert dataset_warnings(a, b, ["the runs used different cases files (...)"]) == []
