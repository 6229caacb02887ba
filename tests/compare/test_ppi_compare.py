"""The human scale in ``raglab compare`` and ``raglab decide`` (raglab.compare.human): the
prediction-powered difference beside the judge's row, ``estimator: ppi`` gates, and the
one-line refusals where labels cannot carry them. Runs written by hand with labels stored
(tests/compare/labelled_runs.py): people's faithfulness drops by 0.05, the judge's rises
by 0.09."""

from __future__ import annotations

import json

import numpy as np
import pytest

from raglab.compare.comparison import CompareCfg, compare_runs, load_run
from raglab.compare.decide import check_ppi_gates
from raglab.compare.gates import parse_gate_set
from raglab.errors import UserError
from raglab.labels.store import LABELS_DIR, LABELS_FILE
from raglab.stats.ppi import ppi_mean
from tests.compare.labelled_runs import labelled_pair
from tests.conftest import run_cli

PPI_GATES = """description: faithfulness on the human scale
gates:
  - {metric: faithfulness, rule: non_inferior, margin: 0.03, estimator: ppi}
"""


def _compare(base, cand):
    return compare_runs(load_run(str(base), None), load_run(str(cand), None), CompareCfg())


def test_compare_gives_the_human_scale_difference_beside_the_judges(tmp_path):
    base, cand, truth = labelled_pair(tmp_path)
    p = run_cli("compare", str(base), str(cand), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads((tmp_path / "out" / "compare.json").read_text())
    row = next(r for r in out["rows"] if r["metric"] == "faithfulness" and r["slice"] is None)
    assert row["ci_low"] > 0.05           # the judge: a clear rise, people's truth excluded
    ppi = out["ppi"]
    assert (ppi["estimator"], ppi["interval"], ppi["alpha"]) == ("ppi++", "auto", 0.05)
    entry = ppi["metrics"]["faithfulness"]
    d = entry["overall"]["delta"]
    assert d["ci_low"] <= truth["human_delta"] <= d["ci_high"] < 0
    assert d["judge_mean"] == pytest.approx(row["delta"])
    assert (d["n_labelled"], d["n_all"]) == (40, 120)
    assert entry["labels"]["candidate"]["usable"] == 40
    # exactly raglab.stats.ppi on the per-case differences
    recs = {role: {json.loads(x)["case_id"]: json.loads(x)["metrics"]["faithfulness"]
                   for x in (run / "records.jsonl").read_text().splitlines()}
            for role, run in (("b", base), ("c", cand))}
    labels = {role: {json.loads(x)["case_id"]: json.loads(x)["label"]
                     for x in (run / LABELS_DIR / LABELS_FILE).read_text().splitlines()}
              for role, run in (("b", base), ("c", cand))}
    ids = truth["sampled"]
    want = ppi_mean([labels["c"][i] - labels["b"][i] for i in ids],
                    [recs["c"][i] - recs["b"][i] for i in ids],
                    [recs["c"][i] - recs["b"][i] for i in recs["b"]], bounds=(-1.0, 1.0))
    assert d["estimate"] == pytest.approx(want.estimate)
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((want.ci_low, want.ci_high))
    assert d["interval"] == want.interval
    # slices with enough labelled pairs, and each run's own human-scale mean
    assert {s["slice"]["value"] for s in entry["slices"] if s["delta"]} >= {"billing", "hr"}
    assert entry["overall"]["candidate"]["estimate"] < entry["overall"]["candidate"][
        "judge_mean"] - 0.1
    md = (tmp_path / "out" / "compare.md").read_text()
    assert "## Human scale (prediction-powered, PPI++, 95%)" in md
    assert "Human scale" in (tmp_path / "out" / "compare.html").read_text()
    assert "human scale, faithfulness:" in p.stdout


def test_a_stratified_sample_is_estimated_stratum_by_stratum(tmp_path):
    from raglab.stats.ppi import ppi_stratified

    base, cand, truth = labelled_pair(tmp_path, n=15, by="intent")
    d = _compare(base, cand).ppi["metrics"]["faithfulness"]["overall"]["delta"]
    assert d["stratified"] is True and d["n_labelled"] == 30
    recs = {role: {json.loads(x)["case_id"]: json.loads(x) for x in
                   (run / "records.jsonl").read_text().splitlines()}
            for role, run in (("b", base), ("c", cand))}
    labels = {role: {json.loads(x)["case_id"]: json.loads(x)["label"] for x in
                     (run / LABELS_DIR / LABELS_FILE).read_text().splitlines()}
              for role, run in (("b", base), ("c", cand))}

    def judge(cid):
        return (recs["c"][cid]["metrics"]["faithfulness"]
                - recs["b"][cid]["metrics"]["faithfulness"])

    strata = {}
    for h in ("billing", "hr"):
        members = [c for c, r in recs["b"].items() if r["tags"]["intent"] == h]
        lab = [c for c in members if c in truth["sampled"]]
        strata[h] = ([labels["c"][c] - labels["b"][c] for c in lab], [judge(c) for c in lab],
                     [judge(c) for c in members])
    want = ppi_stratified(strata, {h: len(s[2]) for h, s in strata.items()})
    assert d["estimate"] == pytest.approx(want.estimate)
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((want.ci_low, want.ci_high))


def test_one_run_without_labels_says_why_and_the_rows_keep_their_contract(tmp_path):
    from raglab.compare.comparison import ROW_KEYS

    base, cand, _ = labelled_pair(tmp_path, label_candidate=False)
    comp = _compare(base, cand)
    entry = comp.ppi["metrics"]["faithfulness"]
    assert entry["overall"]["delta"] is None
    assert "candidate run has no labels of faithfulness" in entry["overall"]["why"]
    assert all(tuple(r) == ROW_KEYS for r in comp.rows)
    import shutil

    shutil.rmtree(base / LABELS_DIR)
    assert _compare(base, cand).to_json()["ppi"] is None     # neither run: no section


def test_decide_gate_on_the_human_scale(tmp_path):
    base, cand, truth = labelled_pair(tmp_path)
    (tmp_path / "ppi.yaml").write_text(PPI_GATES)
    (tmp_path / "judge.yaml").write_text(PPI_GATES.replace(", estimator: ppi", ""))
    p = run_cli("decide", str(base), str(cand), "gates=judge.yaml", "--study", "s",
                cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr          # the judge says GO
    p = run_cli("decide", str(base), str(cand), "gates=ppi.yaml", "--study", "s",
                cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr          # people's drop of 0.05: NO-GO
    assert "on the human scale (PPI++)" in p.stdout
    rec = json.loads(next((tmp_path / "s").glob("decision-*-ppi.json")).read_text())
    r = rec["results"][0]
    assert (r["estimator"], r["status"]) == ("ppi", "fail")
    assert r["ci_high"] < -0.03 < 0 < rec["human_scale"]["metrics"]["faithfulness"][
        "overall"]["delta"]["judge_mean"]
    h = r["human_scale"]
    assert h["labelled_pairs"] == 40 and h["paired_cases"] == 120
    assert h["n_effective"] > 40 and h["gained"] == pytest.approx(h["n_effective"] - 40)
    used = rec["human_scale"]["metrics"]["faithfulness"]["labels"]["baseline"]
    assert used["usable"] == 40
    assert used["labels_sha256"] == __import__("hashlib").sha256(
        (base / LABELS_DIR / LABELS_FILE).read_bytes()).hexdigest()
    md = next((tmp_path / "s").glob("decision-*-ppi.md")).read_text()
    assert "## Human scale" in md and "effective labels (gained)" in md


def _rewrite(path, change):
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    path.write_text("".join(json.dumps(x) + "\n" for x in change(lines)))


def _stale_answer(base, cand, sampled):
    def change(recs):
        for r in recs:
            if r["case_id"] == sampled[0]:
                r["output"]["answer"] += " (edited)"
        return recs
    _rewrite(cand / "records.jsonl", change)


def _other_version(base, cand, sampled):
    for run in (base, cand):
        m = json.loads((run / "metrics.json").read_text())
        m["metric_versions"]["faithfulness"] = "9" * 12
        (run / "metrics.json").write_text(json.dumps(m))


def _missing(base, cand, sampled):
    _rewrite(cand / LABELS_DIR / LABELS_FILE, lambda labs: labs[1:])


def _no_labels(base, cand, sampled):
    import shutil

    shutil.rmtree(cand / LABELS_DIR)


@pytest.mark.parametrize("spoil,words", [
    (_no_labels, "the candidate run has no labels of faithfulness"),
    (_stale_answer, "1 label(s) of the candidate run are stale (the answer changed"),
    (_other_version, "40 label(s) of the baseline run were made under another metric "
                     "version than the run's 999999999999"),
    (_missing, "1 sampled case(s) of the candidate run have no label yet"),
])
def test_decide_refuses_labels_that_cannot_carry_the_gate(tmp_path, spoil, words):
    base, cand, truth = labelled_pair(tmp_path)
    (tmp_path / "ppi.yaml").write_text(PPI_GATES)
    spoil(base, cand, truth["sampled"])
    if spoil in (_missing, _other_version):    # in process: the same check, faster
        gates = parse_gate_set({"gates": [{"metric": "faithfulness", "rule": "non_inferior",
                                           "margin": 0.03, "estimator": "ppi"}]}, "ppi.yaml")
        with pytest.raises(UserError, match="ppi.yaml: gates\\[0\\] \\(overall\\)") as e:
            check_ppi_gates(_compare(base, cand), gates, "ppi.yaml")
        assert words in str(e.value)
        return
    p = run_cli("decide", str(base), str(cand), "gates=ppi.yaml", "--study", "s",
                cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and words in err[0] and "Traceback" not in p.stderr
    assert not (tmp_path / "s").exists() or not list((tmp_path / "s").glob("decision-*"))


def test_too_few_labelled_pairs_refused(tmp_path):
    base, cand, _ = labelled_pair(tmp_path, n=8)
    gates = parse_gate_set({"gates": [{"metric": "faithfulness", "rule": "non_inferior",
                                       "margin": 0.03, "estimator": "ppi"}]}, "g.yaml")
    with pytest.raises(UserError, match="8 labelled pairs .* fewer than 10"):
        check_ppi_gates(_compare(base, cand), gates, "g.yaml")


def test_a_slice_with_too_few_labels_refused_by_name(tmp_path):
    base, cand, _ = labelled_pair(tmp_path, n=16)
    gates = parse_gate_set({"critical_slices": [{"key": "intent"}], "gates": [
        {"metric": "faithfulness", "rule": "non_inferior", "margin": 0.03,
         "estimator": "ppi", "slices": "critical"}]}, "g.yaml")
    comp = _compare(base, cand)
    counts = {s["slice"]["value"]: s["labelled_pairs"]
              for s in comp.ppi["metrics"]["faithfulness"]["slices"]
              if s["slice"]["key"] == "intent"}
    small = next(v for v in sorted(counts) if counts[v] < 10)   # the first one checked
    with pytest.raises(UserError, match=f"gates\\[0\\] \\(intent={small}\\).*"
                                        f"{counts[small]} labelled pair"):
        check_ppi_gates(comp, gates, "g.yaml")


@pytest.mark.parametrize("gate,words", [
    ({"metric": "faithfulness", "rule": "not_worse", "estimator": "ppi"},
     "estimator: ppi applies to rules non_inferior and bound"),
    ({"metric": "acl_leak_rate", "rule": "bound", "max": 0, "estimator": "ppi"},
     "is not judged by a grader"),
    ({"metric": "faithfulness", "rule": "non_inferior", "margin": 0.1, "estimator": "human"},
     "estimator"),
])
def test_gate_schema(gate, words):
    with pytest.raises(UserError, match=words):
        parse_gate_set({"gates": [gate]}, "g.yaml")


def test_bound_on_the_candidates_human_scale_mean(tmp_path):
    from raglab.compare.decide import evaluate_gates

    base, cand, _ = labelled_pair(tmp_path)
    comp = _compare(base, cand)
    gates = parse_gate_set({"gates": [{"metric": "faithfulness", "rule": "bound",
                                       "min": 0.6, "estimator": "ppi"}]}, "g.yaml")
    judge = parse_gate_set({"gates": [{"metric": "faithfulness", "rule": "bound",
                                       "min": 0.6}]}, "g.yaml")
    human = evaluate_gates(comp.rows, gates, ppi=comp.ppi)[0]
    assert human["status"] == "fail" and human["candidate"] < 0.6
    assert evaluate_gates(comp.rows, judge, ppi=comp.ppi)[0]["status"] == "pass"
    assert np.isclose(human["candidate"],
                      comp.ppi["metrics"]["faithfulness"]["overall"]["candidate"]["estimate"])


def test_an_mlflow_run_reads_its_labels_where_it_was_run(tmp_path):
    """An MLflow run is downloaded without its labels: they are read from the directory
    it was run in (its raglab.run_dir), when that is still there."""
    import dataclasses
    import shutil

    from raglab.compare.human import labels_home

    base, cand, _ = labelled_pair(tmp_path)
    download = tmp_path / "download"
    shutil.copytree(cand, download, ignore=shutil.ignore_patterns("labels"))
    src = dataclasses.replace(load_run(str(download), None), mlflow_run_id="a" * 32,
                              origin_dir=cand)
    assert labels_home(src) == cand
    assert labels_home(dataclasses.replace(src, origin_dir=None)) == download
    comp = compare_runs(load_run(str(base), None), src, CompareCfg())
    assert comp.ppi["metrics"]["faithfulness"]["overall"]["delta"]["n_labelled"] == 40


def test_a_pass_fail_difference_on_few_labelled_pairs_with_halls_interval_is_a_warning():
    from raglab.compare.human import ppi_warnings

    def result(metric, pairs, estimator="ppi", interval="hall"):
        return {"gate": f"{metric} non_inferior", "metric": metric, "slice": None,
                "estimator": estimator,
                "human_scale": {"labelled_pairs": pairs, "alpha": 0.05,
                                "interval": interval}}

    warned = ppi_warnings([result("all_vital_present", 60), result("all_vital_present", 100),
                           result("faithfulness", 40), result("all_vital_present", 40,
                                                              "judge"),
                           result("all_vital_present", 40, interval="score")])
    assert len(warned) == 1
    assert warned[0].startswith("all_vital_present non_inferior [overall] rests on 60 "
                                "labelled pairs of a pass/fail metric with Hall's interval "
                                "(a stratified sample): it covered 91-94% instead of 95%")


def test_a_bad_labels_file_is_named_not_taken_for_no_labels(tmp_path):
    base, cand, _ = labelled_pair(tmp_path)
    path = cand / LABELS_DIR / LABELS_FILE
    path.write_text(path.read_text() + "{not json\n")
    comp = _compare(base, cand)               # compare goes on and says so
    assert "candidate" in comp.ppi["errors"]
    gates = parse_gate_set({"gates": [{"metric": "faithfulness", "rule": "non_inferior",
                                       "margin": 0.03, "estimator": "ppi"}]}, "g.yaml")
    with pytest.raises(UserError, match="the candidate run's labels cannot be read: .*"
                                        "labels.jsonl:41"):
        check_ppi_gates(comp, gates, "g.yaml")


def test_the_human_scale_difference_is_an_mlflow_figure_of_the_comparison(tmp_path):
    from raglab.tracking.results import human_scale_figures

    base, cand, _ = labelled_pair(tmp_path)
    comp = compare_runs(load_run(str(base), None), load_run(str(cand), None), CompareCfg())
    delta = comp.ppi["metrics"]["faithfulness"]["overall"]["delta"]
    assert human_scale_figures(comp.ppi) == {
        "compare.ppi.faithfulness.delta": delta["estimate"],
        "compare.ppi.faithfulness.ci_low": delta["ci_low"],
        "compare.ppi.faithfulness.ci_high": delta["ci_high"]}
    assert human_scale_figures(None) == {}


def _all_yes(run):
    path = run / LABELS_DIR / LABELS_FILE
    labs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    path.write_text("".join(json.dumps({**lab, "label": 1.0}) + "\n" for lab in labs))


def test_the_human_scale_mde_agrees_with_its_interval(tmp_path):
    """Labels all yes in 10 pairs: the interval is +-0.28 (Tango's z^2 / (n + z^2)); the
    MDE beside it was (z + z_0.8) se = 0, and a 0.03 margin passed as powered. It is the
    score interval's own, 0.517 (tests/stats/test_ppi_power.py works it by hand)."""
    from raglab.compare.decide import evaluate_gates

    gates = parse_gate_set({"gates": [{"metric": "faithfulness", "rule": "non_inferior",
                                       "margin": 0.03, "estimator": "ppi"}]}, "g.yaml")
    base, cand, _ = labelled_pair(tmp_path / "yes", n=10)
    for run in (base, cand):
        _all_yes(run)
    comp = _compare(base, cand)
    d = comp.ppi["metrics"]["faithfulness"]["overall"]["delta"]
    assert (round(d["ci_low"], 2), round(d["ci_high"], 2), d["se"]) == (-0.28, 0.28, 0.0)
    r = evaluate_gates(comp.rows, gates, ppi=comp.ppi)[0]
    assert (round(r["mde"], 3), r["underpowered"]) == (0.517, True)
    assert r["mde"] == pytest.approx(d["mde"])
    from raglab.stats.ppi_power import interval_mde

    # a [0, 1] share with labels that vary: Hall's interval, its half-width scaled
    base, cand, _ = labelled_pair(tmp_path / "share")
    comp = _compare(base, cand)
    d = comp.ppi["metrics"]["faithfulness"]["overall"]["delta"]
    assert d["interval"] == "hall"
    assert d["mde"] == pytest.approx(interval_mde(d["estimate"], d["ci_low"], d["ci_high"],
                                                  0.05))
    assert evaluate_gates(comp.rows, gates, ppi=comp.ppi)[0]["mde"] == pytest.approx(d["mde"])
    # the runs' own means carry no MDE (it is the difference's)
    assert "mde" not in comp.ppi["metrics"]["faithfulness"]["overall"]["baseline"]
