"""Calibration reaches the decision, and self-grading is shown: real runs of the tiny set,
a real ``raglab calibrate`` of the offline grader on the demo labels (claims kappa 0.579,
nuggets 0.458, docs/calibration.md), and ``raglab decide`` / ``raglab compare`` through the
CLI in subprocesses, with known answers for ``min_kappa``."""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import date

import pytest

from raglab.data.dataset import resolve_path
from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl

pytestmark = pytest.mark.slow  # calibrate and four runs, end to end

DEMO_LABELS = resolve_path("pkg://raglab/datasets/demo/labels.jsonl")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """base / same: two runs of one configuration whose cache_dir holds a calibration of
    their grader version; bare_base / bare_same: the same, with an empty cache_dir."""
    root = tmp_path_factory.mktemp("trust")
    corpus = write_jsonl(root / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(root / "cases.jsonl", TINY_CASES)
    out = {"root": root}
    for name, cache in (("base", "cache"), ("same", "cache"), ("bare_base", "bare"),
                        ("bare_same", "bare")):
        proc = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                       "tracking=none", "progress=off", f"hydra.run.dir={root / name}",
                       f"cache_dir={root / cache}", cwd=root)
        assert proc.returncode == 0, proc.stderr
        out[name] = root / name
    proc = run_cli("calibrate", "dataset=demo", "tracking=none", f"cache_dir={root / 'cache'}",
                   f"hydra.run.dir={root / 'cal'}", cwd=root)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out["calibration"] = json.loads((root / "cal" / "calibration.json").read_text())
    return out


def _gates(tmp_path, min_kappa: dict | None, name: str = "trust",
           calibration_from: str | None = "any") -> str:
    # 3-4 paired cases cannot show non-inferiority at a margin of 0.05 (with no case
    # changed the score interval is +-0.73 at n = 3, where no change is still 2.5% likely
    # at a true difference of 0.71): margins of 0.8
    lines = ["gates:",
             "  - {metric: faithfulness, rule: non_inferior, margin: 0.8}",
             "  - {metric: vital_nugget_recall, rule: non_inferior, margin: 0.8}",
             "  - {metric: acl_leak_rate, rule: bound, max: 0}"]
    if min_kappa is not None:
        lines.append("min_kappa: " + json.dumps(min_kappa))
        if calibration_from:  # the demo's labels judge these runs of the tiny set
            lines.append(f"calibration_from: {calibration_from}")
    path = tmp_path / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _decide(runs, tmp_path, gates: str, base="base", cand="same", *extra: str):
    study = tmp_path / "study"
    proc = run_cli("decide", str(runs[base]), str(runs[cand]), f"gates={gates}",
                   "--study", str(study), *extra, cwd=tmp_path)
    stem = f"decision-{date.today().isoformat()}-{'trust'}"
    if proc.returncode in (0, 1, 4):
        # a second decision of the day is numbered (-2, -3, ...): read the one just written
        made = sorted(study.glob(f"{stem}*.json"), key=lambda p: p.stat().st_mtime_ns)
        last = made[-1]
        return (proc, json.loads(last.read_text()), last.with_suffix(".md").read_text())
    return proc, None, None


def _check(rec, family):
    (r,) = [r for r in rec["results"] if r["rule"] == "min_kappa" and r["family"] == family]
    return r


def test_calibrate_writes_what_decide_reads(runs):
    doc = runs["calibration"]
    assert round(doc["claims"]["kappa"], 3) == 0.579 and doc["claims"]["n"] == 157
    assert round(doc["nuggets"]["kappa"], 3) == 0.458 and doc["nuggets"]["n"] == 72
    assert doc["labels"]["sha256"] == hashlib.sha256(DEMO_LABELS.read_bytes()).hexdigest()
    m = json.loads((runs["base"] / "metrics.json").read_text())
    assert m["metric_versions"]["faithfulness"] == doc["versions"]["faithfulness"]


def test_kappa_above_the_minimum_is_go(runs, tmp_path):
    proc, rec, md = _decide(runs, tmp_path,
                            _gates(tmp_path, {"faithfulness": 0.45, "nuggets": 0.3}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert rec["decision"] == "GO"
    faith, nug = _check(rec, "faithfulness"), _check(rec, "nuggets")
    assert faith["status"] == nug["status"] == "pass"
    assert faith["kappa"] == pytest.approx(0.579, abs=5e-4)
    assert "faithfulness: kappa 0.579 [" in faith["reason"]
    assert "one-sided 95% lower bound 0.493 >= 0.45" in faith["reason"]
    assert faith["kappa_lcb"] == pytest.approx(0.4930, abs=5e-4)
    sha = runs["calibration"]["labels"]["sha256"]
    cal = rec["calibration"]["faithfulness"]["candidate"]
    assert cal["calibrated"] and cal["n"] == 157 and cal["labels_sha256"] == sha
    assert cal["ci_low"] < cal["kappa"] < cal["ci_high"]
    assert set(rec["calibration"]) == {"faithfulness", "nuggets"}  # the gated families
    assert rec["gates"]["set"]["min_kappa"] == {"faithfulness": 0.45, "nuggets": 0.3}
    assert "## Judges" in md
    version = rec["candidate"]["metric_versions"]["faithfulness"]
    row = next(x for x in md.splitlines() if x.startswith(f"| faithfulness | {version} |"))
    assert f"| 0.579 [0.477, 0.678] | 157 claim | {sha} |" in row
    assert row.endswith("| same | 0.45 | PASS |")
    assert f"{'PASS':12}  faithfulness judge kappa" in proc.stdout


def test_kappa_below_the_minimum_is_no_go_naming_family_and_kappa(runs, tmp_path):
    # kappa 0.579 is above 0.55, its one-sided 95% lower bound 0.493 is not: NO-GO
    proc, rec, md = _decide(runs, tmp_path,
                            _gates(tmp_path, {"faithfulness": 0.55, "nuggets": 0.3}))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert rec["decision"] == "NO-GO" and "decision: NO-GO" in proc.stdout
    faith = _check(rec, "faithfulness")
    assert faith["status"] == "fail"
    assert faith["reason"].startswith("faithfulness: kappa 0.579 [")
    assert "one-sided 95% lower bound 0.493 < 0.55" in faith["reason"]
    assert _check(rec, "nuggets")["status"] == "pass"
    # every gate itself passed: the judge's kappa alone made it NO-GO
    assert {r["status"] for r in rec["results"] if r["rule"] != "min_kappa"} <= {"pass", "n/a"}
    assert f"{'FAIL':12}  faithfulness judge kappa" in proc.stdout and "< 0.55" in proc.stdout


def test_uncalibrated_grader_version_is_no_go(runs, tmp_path):
    proc, rec, md = _decide(runs, tmp_path, _gates(tmp_path, {"nuggets": 0.1}),
                            "bare_base", "bare_same")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    check = _check(rec, "nuggets")
    version = rec["candidate"]["metric_versions"]["nuggets"]
    assert check["status"] == "fail"
    assert check["reason"].startswith(f"nuggets: grader version {version} is uncalibrated")
    assert rec["calibration"]["nuggets"]["candidate"] == {"version": version,
                                                          "calibrated": False}
    assert "uncalibrated" in md


def test_without_min_kappa_the_calibration_is_shown_and_does_not_gate(runs, tmp_path):
    proc, rec, md = _decide(runs, tmp_path, _gates(tmp_path, None), "bare_base", "bare_same")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not [r for r in rec["results"] if r["rule"] == "min_kappa"]
    assert rec["calibration"]["faithfulness"]["candidate"]["calibrated"] is False
    assert "| faithfulness |" in md and "uncalibrated" in md


def test_min_kappa_of_a_family_no_gate_reads_does_not_apply(runs, tmp_path):
    proc, rec, _ = _decide(runs, tmp_path, _gates(tmp_path, {"correctness": 0.9}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check = _check(rec, "correctness")
    assert check["status"] == "n/a" and "no gate of this set reads" in check["reason"]


def test_min_kappa_as_an_override_of_a_shipped_gate_set(runs, tmp_path):
    proc = run_cli("decide", str(runs["base"]), str(runs["same"]), "gates=default",
                   "+gates.min_kappa.faithfulness=0.9", "gates.calibration_from=any",
                   "--study", str(tmp_path / "s"),
                   cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "faithfulness: kappa 0.579" in proc.stdout and "< 0.9" in proc.stdout
    gates = _gates(tmp_path, None)  # a gate set given by path takes it too
    proc = run_cli("decide", str(runs["base"]), str(runs["same"]), f"gates={gates}",
                   "+gates.min_kappa.nuggets=0.3", "+gates.calibration_from=any",
                   "--study", str(tmp_path / "s"),
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nuggets: kappa 0.458" in proc.stdout and ">= 0.3" in proc.stdout


@pytest.mark.parametrize("min_kappa, message", [
    ({"faithfullness": 0.5}, "min_kappa: 'faithfullness': unknown metric family"),
    ({"relevance": 0.5}, "min_kappa: 'relevance': no human labels calibrate it"),
    ({"nuggets": 1.5}, "min_kappa: nuggets: 1.5 is not a kappa"),
])
def test_bad_min_kappa_is_a_one_line_config_error(runs, tmp_path, min_kappa, message):
    gates = _gates(tmp_path, min_kappa)
    proc, _, _ = _decide(runs, tmp_path, gates)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert gates in line and message in line
    assert not (tmp_path / "study").exists()


def test_self_graded_runs_are_shown_in_compare_and_decide(runs, tmp_path):
    graded = tmp_path / "graded"
    shutil.copytree(runs["same"], graded)
    m = json.loads((graded / "metrics.json").read_text())
    assert m["self_graded"] is False
    (graded / "metrics.json").write_text(json.dumps({**m, "self_graded": True}))
    runs = {**runs, "graded": graded}
    proc, rec, md = _decide(runs, tmp_path, _gates(tmp_path, None), "base", "graded")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert rec["self_graded"] == {"baseline": False, "candidate": True}
    assert rec["candidate"]["self_graded"] is True
    assert any("candidate run is self-graded" in w for w in rec["warnings"])
    assert "| self-graded (grader's model is the system's) | no | YES |" in md

    out = tmp_path / "cmp"
    proc = run_cli("compare", str(runs["base"]), str(graded), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING: the candidate run is self-graded" in proc.stdout
    doc = json.loads((out / "compare.json").read_text())
    assert doc["baseline"]["self_graded"] is False and doc["candidate"]["self_graded"] is True
    cmd = (out / "compare.md").read_text()
    assert "| self-graded (grader's model is the system's) | no | YES |" in cmd
    assert "self-graded" in (out / "compare.html").read_text()


def test_compare_shows_every_graded_family_calibration(runs, tmp_path):
    out = tmp_path / "cmp"
    proc = run_cli("compare", str(runs["base"]), str(runs["same"]), "--out", str(out),
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((out / "compare.json").read_text())
    cal = doc["calibration"]
    assert {"faithfulness", "nuggets", "relevance"} <= set(cal) and "retrieval" not in cal
    assert cal["faithfulness"]["candidate"]["kappa"] == pytest.approx(0.579, abs=5e-4)
    assert cal["faithfulness"]["baseline"] == cal["faithfulness"]["candidate"]
    assert cal["nuggets"]["candidate"]["n"] == 72
    assert cal["relevance"]["candidate"]["calibrated"] is False  # no labels kind
    sha = runs["calibration"]["labels"]["sha256"]
    md = (out / "compare.md").read_text()
    assert "## Calibration of the graded families" in md
    row = next(x for x in md.splitlines() if x.startswith("| faithfulness | both |"))
    assert "0.579 [" in row and "157 claim" in row and sha in row
    assert "| relevance | both |" in md
    assert "kappa 0.58 [" in proc.stdout  # the terminal's version lines
    html = (out / "compare.html").read_text()
    assert "Calibration of the graded families" in html and sha in html


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_a_calibration_in_the_tracking_store_is_found_with_uri(runs, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli("calibrate", "dataset=demo", f"tracking.uri={uri}",
                   f"cache_dir={tmp_path / 'elsewhere'}",
                   f"hydra.run.dir={tmp_path / 'cal'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    gates = _gates(tmp_path, {"faithfulness": 0.25})
    # the runs' own cache_dir has no record: uncalibrated without the store, found with it
    proc, rec, _ = _decide(runs, tmp_path, gates, "bare_base", "bare_same")
    assert proc.returncode == 1 and _check(rec, "faithfulness")["status"] == "fail"
    proc, rec, md = _decide(runs, tmp_path, gates, "bare_base", "bare_same", "--uri", uri)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cal = rec["calibration"]["faithfulness"]["candidate"]
    assert cal["calibrated"] and cal["mlflow_run_id"] and cal["created"], rec["calibration"]
    assert cal["labels_sha256"] == runs["calibration"]["labels"]["sha256"] and cal["n"] == 157
    assert cal["kappa"] == pytest.approx(runs["calibration"]["claims"]["kappa"])


def test_a_calibration_from_another_dataset_is_flagged_and_counts_as_uncalibrated(
        runs, tmp_path):
    """The demo's labels judged, runs of the tiny set decided: flagged in decide and
    compare; min_kappa treats it as uncalibrated unless calibration_from: any."""
    doc = runs["calibration"]
    assert doc["dataset"]["name"] == "demo" and doc["dataset"]["n_cases"] == 228
    assert len(doc["dataset"]["cases_sha256"]) == 64
    gates = _gates(tmp_path, {"faithfulness": 0.1}, calibration_from=None)
    proc, rec, md = _decide(runs, tmp_path, gates)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    check = _check(rec, "faithfulness")
    assert check["status"] == "fail" and check["dataset_match"] == "other"
    assert "calibrated on labels of dataset demo (228 cases, sha256 " in check["reason"]
    assert "treated as uncalibrated" in check["reason"]
    flag = [w for w in rec["warnings"] if "faithfulness calibration" in w]
    assert flag and "not on the candidate's dataset cases" in flag[0]
    assert rec["calibration"]["faithfulness"]["candidate"]["dataset"]["name"] == "demo"
    out = tmp_path / "cmp"
    proc = run_cli("compare", str(runs["base"]), str(runs["same"]), "--out", str(out),
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "compare.json").read_text())
    assert any("not on the candidate's dataset cases" in w for w in doc["warnings"])
