"""compare_runs on hand-made records: pairing, means, slices, adjustment, flips, diagnoses."""

import json
from pathlib import Path

import pytest

from raglab.compare.comparison import (
    ROW_KEYS,
    CompareCfg,
    RunSource,
    VersionMismatch,
    compare_runs,
    load_run,
)
from raglab.compare.naming import swept_keys
from raglab.compare.render import render_md, render_terminal
from raglab.compare.render_html import render_html
from raglab.compare.sweep import Job, find_job
from raglab.errors import UserError
from raglab.stats import adjust_pvalues

VERSIONS = {"retrieval": "r1", "faithfulness": "f1", "nuggets": "n1", "abstention": "a1"}


def rec(cid, metrics, tags=None, answerable=True, diagnosis="absent", answer="ans"):
    r = {"case_id": cid, "tags": tags or {}, "gold": {"answerable": answerable},
         "output": {"answer": answer}, "metrics": metrics}
    if diagnosis != "absent":
        r["diagnosis"] = diagnosis
    return r


def source(label, records, versions=VERSIONS, n_cases=None, status=None):
    metrics = {"metric_versions": dict(versions),
               "n_cases": len(records) if n_cases is None else n_cases}
    return RunSource(label, Path("/nonexistent") / label, label, {}, metrics, records,
                     status=status)


def pair(n=30):
    """Candidate better on final.evidence_recall for intent=a, same elsewhere."""
    base, cand = [], []
    for i in range(n):
        tag = {"intent": "a" if i % 2 == 0 else "b"}
        fb = 0.0 if (i % 2 == 0 and i % 4 == 0) else 1.0
        fc = 1.0
        base.append(rec(f"c{i}", {"final.evidence_recall": fb, "faithfulness": 1.0,
                                  "false_answer_rate": None}, tag,
                        diagnosis={"causes": ["retrieval"]} if fb < 1 else None))
        cand.append(rec(f"c{i}", {"final.evidence_recall": fc, "faithfulness": 1.0,
                                  "false_answer_rate": None}, tag, diagnosis=None))
    return source("base", base), source("cand", cand)


def test_rows_have_exactly_the_keys_and_correct_means():
    b, c = pair()
    comp = compare_runs(b, c, CompareCfg(n_bootstrap=500))
    assert all(tuple(r) == ROW_KEYS for r in comp.rows)
    r = comp.row("final.evidence_recall")
    n_fail = sum(1 for i in range(30) if i % 4 == 0)
    assert r["n"] == 30 and r["baseline"] == pytest.approx(1 - n_fail / 30)
    assert r["candidate"] == 1.0 and r["delta"] == pytest.approx(n_fail / 30)
    assert (r["wins"], r["ties"], r["losses"]) == (n_fail, 30 - n_fail, 0)
    assert r["ci_low"] <= r["delta"] <= r["ci_high"] and r["ci_low"] > 0
    ra = comp.row("final.evidence_recall", ("intent", "a"))
    rb = comp.row("final.evidence_recall", ("intent", "b"))
    assert ra["n"] == 15 and ra["delta"] == pytest.approx(n_fail / 15)
    assert rb["delta"] == 0 and rb["p_adjusted"] == 1.0
    assert comp.row("final.evidence_recall", ("answerable", "yes"))["n"] == 30
    # a metric that never applies: n 0, no means, no test
    fa = comp.row("false_answer_rate")
    assert fa["n"] == 0 and fa["baseline"] is None and fa["p_value"] is None
    json.dumps(comp.to_json(), allow_nan=False)


def test_means_are_over_cases_where_both_runs_apply():
    b = source("b", [rec("x", {"faithfulness": 0.0}), rec("y", {"faithfulness": None}),
                     rec("z", {"faithfulness": 1.0})])
    c = source("c", [rec("x", {"faithfulness": 1.0}), rec("y", {"faithfulness": 1.0}),
                     rec("z", {"faithfulness": None})])
    r = compare_runs(b, c, CompareCfg(n_bootstrap=200)).row("faithfulness")
    assert (r["n"], r["baseline"], r["candidate"], r["delta"]) == (1, 0.0, 1.0, 1.0)


def _tested(rows, family):
    """The rows of a family that are tested: with a p-value, a difference, and not an
    alias of a row before them."""
    seen, out = set(), []
    for r in rows:
        key = (r["metric"], None if r["slice"] is None else tuple(r["slice"].values()))
        if r["family"] != family or r["p_value"] is None or not (r["wins"] + r["losses"]):
            seen.add(key)
            continue
        aliases = {(a["metric"], None if a["slice"] is None else tuple(a["slice"].values()))
                   for a in r["aliases"]}
        if not aliases & seen:
            out.append(r)
        seen.add(key)
    return out


def test_confirmatory_and_exploratory_families_adjusted_apart():
    b, c = pair()
    for method in ("holm", "bh"):
        comp = compare_runs(b, c, CompareCfg(n_bootstrap=500, adjust=method))
        conf = _tested(comp.rows, "confirmatory")
        expl = _tested(comp.rows, "exploratory")
        # headline metrics overall, and nothing else, are confirmatory
        assert conf and all(r["slice"] is None for r in conf)
        assert all(r["exploratory"] == (r["family"] == "exploratory") for r in comp.rows)
        assert [r["p_adjusted"] for r in conf] == adjust_pvalues(
            [r["p_value"] for r in conf], method)
        assert expl and [r["p_adjusted"] for r in expl] == adjust_pvalues(
            [r["p_value"] for r in expl], "bh")
        assert comp.settings["family_size"] == len(conf)
        assert comp.settings["exploratory_size"] == len(expl)
        assert comp.settings["adjust"] == method
        assert ("Holm" if method == "holm" else "Benjamini-Hochberg") in render_md(comp)


def test_identical_rows_are_tested_once_and_name_their_aliases():
    # every case is answerable: the answerable=yes slice repeats the overall rows
    b, c = pair()
    comp = compare_runs(b, c, CompareCfg(n_bootstrap=500))
    overall = comp.row("final.evidence_recall")
    yes = comp.row("final.evidence_recall", ("answerable", "yes"))
    assert {"metric": "final.evidence_recall", "slice": {"key": "answerable", "value": "yes"}} \
        in overall["aliases"]
    assert {"metric": "final.evidence_recall", "slice": None} in yes["aliases"]
    assert yes["p_adjusted"] == overall["p_adjusted"]
    assert (overall["family"], yes["family"]) == ("confirmatory", "exploratory")
    assert comp.settings["aliased_rows"] >= 1


def test_small_slices_marked_never_hidden():
    b, c = pair()
    comp = compare_runs(b, c, CompareCfg(n_bootstrap=200, min_slice_n=20))
    small = {(s["key"], s["value"]): s["small"] for s in comp.slices}
    assert small == {("intent", "a"): True, ("intent", "b"): True, ("answerable", "yes"): False}
    assert comp.info("faithfulness", ("intent", "a"))["small"] is True
    assert "intent=a (small)" in render_md(comp)


def test_flipped_cases_with_both_diagnoses():
    b, c = pair()
    comp = compare_runs(b, c, CompareCfg(n_bootstrap=200))
    f = comp.flipped["final.evidence_recall"]
    assert f["n_pass_to_fail"] == 0 and f["n_fail_to_pass"] == 8
    x = f["fail_to_pass"][0]
    assert x["case_id"] == "c0" and x["baseline_diagnosis"] == {"causes": ["retrieval"]}
    assert x["candidate_diagnosis"] is None and x["baseline_answer"] == "ans"
    assert comp.flipped["faithfulness"]["n_fail_to_pass"] == 0


def test_lower_is_better_flip_and_not_recorded_diagnosis():
    b = source("b", [rec("u", {"false_answer_rate": 0.0}, answerable=False)])
    c = source("c", [rec("u", {"false_answer_rate": 1.0}, answerable=False)])
    comp = compare_runs(b, c, CompareCfg(n_bootstrap=100))
    x = comp.flipped["false_answer_rate"]["pass_to_fail"][0]
    assert x["baseline_diagnosis"] == "not recorded"
    assert comp.diagnoses["recorded"] == {"baseline": False, "candidate": False}
    assert comp.diagnoses["slices"]["answerable"]["no"]["baseline"] == {"not recorded": 1}


def test_diagnosis_counts_side_by_side():
    b, c = pair()
    d = compare_runs(b, c, CompareCfg(n_bootstrap=100)).diagnoses
    assert d["overall"]["baseline"] == {"retrieval": 8, "passed": 22}
    assert d["overall"]["candidate"] == {"passed": 30}
    assert d["slices"]["intent"]["a"]["baseline"] == {"retrieval": 8, "passed": 7}


def test_case_mismatch_refused_unless_allowed():
    b, c = pair()
    c.records = c.records[:-2]
    c.metrics["n_cases"] = len(c.records)
    c._by_id = None
    with pytest.raises(UserError, match="--allow-case-mismatch"):
        compare_runs(b, c, CompareCfg(n_bootstrap=100))
    comp = compare_runs(b, c, CompareCfg(n_bootstrap=100), allow_case_mismatch=True)
    assert comp.settings["n_cases"] == 28 and "28 cases in both runs" in comp.warnings[0]
    assert render_md(comp).split("\n")[2].startswith("> **Warning:**")


def test_version_mismatch_names_family_and_both_versions():
    b, c = pair()
    c.metrics["metric_versions"] = {**VERSIONS, "faithfulness": "f2"}
    with pytest.raises(VersionMismatch, match="faithfulness: baseline f1, candidate f2"):
        compare_runs(b, c, CompareCfg(n_bootstrap=100))
    comp = compare_runs(b, c, CompareCfg(n_bootstrap=100), allow_version_mismatch=True)
    assert comp.row("faithfulness")["comparable"] is False
    assert comp.row("faithfulness")["p_adjusted"] is None
    assert comp.row("final.evidence_recall")["comparable"] is True
    assert "not comparable" in comp.warnings[0]
    assert "not comparable" in render_terminal(comp)


@pytest.mark.parametrize("change, why", [
    (dict(n_cases=40), "30 of its 40 cases"), (dict(status="KILLED"), "KILLED"),
    (dict(status="RUNNING"), "RUNNING")])
def test_incomplete_refused_unless_allowed(change, why):
    b, c = pair()
    c = source("cand", c.records, **change)
    with pytest.raises(UserError, match=why):
        compare_runs(b, c, CompareCfg(n_bootstrap=100))
    comp = compare_runs(b, c, CompareCfg(n_bootstrap=100), allow_incomplete=True)
    assert "did not finish" in comp.warnings[0]


def test_html_is_self_contained():
    b, c = pair()
    page = render_html(compare_runs(b, c, CompareCfg(n_bootstrap=100)))
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert 'src="data:image/png;base64,' in page and "<table" in page


def test_load_run_errors(tmp_path):
    with pytest.raises(UserError, match="no such run directory or MLflow run id"):
        load_run(str(tmp_path / "missing"))
    with pytest.raises(UserError, match="records.jsonl is missing"):
        load_run(str(tmp_path))
    (tmp_path / "records.jsonl").write_text("")
    with pytest.raises(UserError, match="no records"):
        load_run(str(tmp_path))
    with pytest.raises(UserError, match="no MLflow store"):
        load_run("0" * 32, f"sqlite:///{tmp_path}/none.db")
    assert not (tmp_path / "none.db").exists()


def test_swept_keys_and_find_job():
    mr = {"hydra": {"overrides": {"task": ["dataset.cases=x", "k=3,5", "chunker.size=64,128",
                                           "tags=[a,b]"]},
                    "sweeper": {"params": {"reranker": "none,lexical", "k": "1,2"}}}}
    assert swept_keys(mr) == ["k", "chunker.size", "reranker"]
    jobs = [Job(f"chunker.size={s},k={k}", str(i), {}, None)
            for i, (s, k) in enumerate([(64, 3), (128, 3)])]
    assert find_job(jobs, "1").number == "1"
    assert find_job(jobs, "chunker.size=128,k=3").number == "1"
    assert find_job(jobs, "k=3,chunker.size=64").number == "0"
    with pytest.raises(UserError, match="names no job"):
        find_job(jobs, "k=9")


def test_different_diagnosis_versions_warn():
    b, c = pair()
    b.metrics["metric_versions"] = {**VERSIONS, "diagnosis": "d1"}
    c.metrics["metric_versions"] = {**VERSIONS, "diagnosis": "d2"}
    comp = compare_runs(b, c, CompareCfg(n_bootstrap=100))
    assert any("diagnosis version: baseline d1, candidate d2" in w for w in comp.warnings)
    assert all(r["comparable"] for r in comp.rows)


def _sweep(params_list, names):
    from raglab.compare.sweep import SweepComparison
    jobs = [Job(",".join(f"{k}={v}" for k, v in p.items()), str(i), p, None)
            for i, p in enumerate(params_list)]
    sc = SweepComparison("sw", names, jobs[0], jobs)
    sc.cells["faithfulness"] = {
        j.name: {"baseline": 0.5, "candidate": 0.6, "delta": 0.1 * i, "ci_low": 0.0,
                 "ci_high": 0.2 * i, "p_value": 0.01, "p_adjusted": 0.02, "n": 10,
                 "comparable": True, "significant": i == 2, "direction": "higher"}
        for i, j in enumerate(jobs) if i}
    return sc


def test_sweep_grid_two_params_rows_by_columns():
    from raglab.compare.sweep_render import grid
    sc = _sweep([{"k": "3", "size": "64"}, {"k": "3", "size": "128"},
                 {"k": "10", "size": "64"}, {"k": "10", "size": "128"}], ["k", "size"])
    header, text, _ = grid(sc, "faithfulness")
    assert header == ["k \\ size", "64", "128"]      # numeric order, not text order
    assert text[0] == ["3", "baseline", "+0.100 [+0.000, +0.200]"]
    assert text[1] == ["10", "+0.200 [+0.000, +0.400] *", "+0.300 [+0.000, +0.600]"]


def test_sweep_grid_one_row_per_job_beyond_two_params():
    from raglab.compare.sweep_render import grid
    sc = _sweep([{"a": "1", "b": "x", "c": "p"}, {"a": "2", "b": "x", "c": "p"},
                 {"a": "2", "b": "y", "c": "q"}], ["a", "b", "c"])
    header, text, _ = grid(sc, "faithfulness")
    assert header == ["a", "b", "c", "delta [CI]"]
    assert text == [["1", "x", "p", "baseline"], ["2", "x", "p", "+0.100 [+0.000, +0.200]"],
                    ["2", "y", "q", "+0.200 [+0.000, +0.400] *"]]


def test_questions_from_the_dataset_and_tolerated_when_gone(tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "u", "question": "Is it?"}) + "\n")
    b = source("b", [rec("u", {"false_answer_rate": 0.0}, answerable=False)])
    c = source("c", [rec("u", {"false_answer_rate": 1.0}, answerable=False)])
    c.config = {"dataset": {"cases": str(cases)}}
    comp = compare_runs(b, c, CompareCfg(n_bootstrap=100))
    assert comp.flipped["false_answer_rate"]["pass_to_fail"][0]["question"] == "Is it?"
    cases.unlink()
    comp = compare_runs(b, c, CompareCfg(n_bootstrap=100))
    assert comp.flipped["false_answer_rate"]["pass_to_fail"][0]["question"] is None
    assert "(question not found)" in render_md(comp)


def test_grader_noise_from_repeats_known_answer():
    """Each candidate case repeated 4 times with variance 0.04 (baseline not repeated):
    noise s.e. of the delta = sqrt(n * 0.04 / 4) / n = 0.1 / sqrt(n)."""
    n = 25
    base = [rec(f"c{i}", {"faithfulness": 0.5 + 0.02 * (i % 3)}) for i in range(n)]
    cand = []
    for i in range(n):
        r = rec(f"c{i}", {"faithfulness": 0.6 + 0.02 * (i % 5)})
        r["repeats"], r["repeat_variance"] = 4, {"faithfulness": 0.04}
        cand.append(r)
    comp = compare_runs(source("b", base), source("c", cand), CompareCfg(n_bootstrap=500))
    x = comp.grader_noise["faithfulness"]
    assert x["n"] == n and x["repeated"] == {"baseline": False, "candidate": True}
    assert x["noise_se"] == pytest.approx(0.1 / n ** 0.5)
    r = comp.row("faithfulness")
    z = 1.959963984540054
    assert x["interval_se"] == pytest.approx((r["ci_high"] - r["ci_low"]) / (2 * z))
    assert 0 < x["noise_share"] <= 1
    assert "grader_noise" in comp.to_json()
    assert "Grader noise" in render_md(comp)
    assert "grader noise in faithfulness" in render_terminal(comp)


def test_no_grader_noise_section_without_repeats():
    b, c = pair()
    comp = compare_runs(b, c, CompareCfg(n_bootstrap=300))
    assert comp.grader_noise == {} and "Grader noise" not in render_md(comp)
