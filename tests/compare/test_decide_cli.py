"""``raglab decide`` end to end: real runs of the tiny dataset, real subprocesses."""

import json
import re
from datetime import date
from pathlib import Path

import pytest

from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run directories of the tiny dataset: base, same (same config again), leaky
    (system.enforce_acl=false) and regraded (another grader setting: other metric versions)."""
    root = tmp_path_factory.mktemp("decide")
    corpus = write_jsonl(root / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(root / "cases.jsonl", TINY_CASES)
    out = {}
    for name, extra in (("base", []), ("same", []), ("leaky", ["system.enforce_acl=false"]),
                        ("regraded", ["grader.support_threshold=60"])):
        proc = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                       "tracking=none", "progress=off", f"hydra.run.dir={root / name}",
                       f"cache_dir={root / 'cache'}", *extra, cwd=root)
        assert proc.returncode == 0, proc.stderr
        out[name] = root / name
    out["root"] = root
    return out


def _record(study, name="default"):
    stem = f"decision-{date.today().isoformat()}-{name}"
    return (json.loads((study / f"{stem}.json").read_text()),
            (study / f"{stem}.md").read_text())


def test_a_leaking_candidate_is_no_go(runs, tmp_path):
    study = runs["root"] / "study-leak"  # inside the project the runs are in
    study.mkdir()
    (study / "README.md").write_text("Intro line\n\n# Can we drop ACL enforcement?\n\nmore\n")
    proc = run_cli("decide", str(runs["base"]), str(runs["leaky"]), "gates=default",
                   "--study", str(study), cwd=runs["root"])
    assert proc.returncode == 1, proc.stderr
    assert "decision: NO-GO" in proc.stdout
    rec, md = _record(study)
    assert rec["decision"] == "NO-GO" and rec["question"] == "Can we drop ACL enforcement?"
    acl = [r for r in rec["results"] if r["metric"] == "acl_leak_rate"]
    assert [(r["status"], r["candidate"]) for r in acl] == [("fail", 0.25)]
    fa = [r for r in rec["results"] if r["metric"] == "false_answer_rate"][0]
    assert fa["status"] == "fail" and fa["delta"] == 1.0
    assert {"key": "system.enforce_acl", "baseline": "true", "candidate": "false"} \
        in rec["config_diff"]
    assert rec["baseline"]["dataset"]["cases_sha256"] == rec["candidate"]["dataset"]["cases_sha256"]
    assert rec["baseline"]["dataset"]["corpus_sha256"]
    # the files that replaced the demo's are named as such, relative to the record
    assert rec["baseline"]["dataset"]["name"] == "cases"  # after its cases file
    assert not Path(rec["baseline"]["dataset"]["cases"]).is_absolute()
    assert (study / rec["baseline"]["dataset"]["cases"]).resolve() == \
        (runs["root"] / "cases.jsonl").resolve()
    assert not Path(rec["baseline"]["run_dir"]).is_absolute()
    assert (study / rec["baseline"]["run_dir"]).resolve() == runs["base"].resolve()
    assert rec["metric_versions"]["baseline"]["diagnosis"]
    assert rec["diagnoses"]["overall"]["access_control"] == {"baseline": 0, "candidate": 1,
                                                            "change": 1}
    flips = rec["flipped"]["false_answer_rate"]["pass_to_fail"]
    assert [f["case_id"] for f in flips] == ["t-3"]
    assert flips[0]["candidate_diagnosis"]["causes"] == ["hallucinated_answer", "access_control"]
    # the Markdown record: question, runs and hashes, differences, gates, versions, flips
    assert md.startswith("# Decision: NO-GO (default, ")
    assert "**Question.** Can we drop ACL enforcement?" in md
    assert rec["baseline"]["dataset"]["corpus_sha256"] in md
    assert "| system.enforce_acl | true | false |" in md
    assert re.search(r"\| acl_leak_rate bound \| overall \| candidate <= 0 \| 0 \| 0\.25 \| "
                     r"\+0\.25 \| [^|]+ \| [^|]+ \| 4 \| [^|]+ \| FAIL \|", md)
    assert "| diagnosis |" in md and "## Metric versions" in md
    assert "| t-3 | 0 → 1 | Who do I escalate payment incidents to? |" in md
    assert "hallucinated_answer, access_control" in md


@pytest.mark.slow  # end to end (CLI runs): in the slow suite
def test_an_identical_rerun_of_four_cases_is_not_shown_non_inferior(runs, tmp_path):
    """No case changed, yet 3-4 cases cannot exclude a drop of 0.05: the interval of an
    unchanged pass/fail metric is about +-z^2 / (n + z^2), not [0, 0]. Nor do they show a
    drop: INCONCLUSIVE (exit 4), with the cases each check would need."""
    proc = run_cli("decide", str(runs["base"]), str(runs["same"]), "gates=default",
                   "--name", "tiny", cwd=tmp_path)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    rec, _ = _record(tmp_path, "tiny")
    assert rec["decision"] == "INCONCLUSIVE"
    ni = [r for r in rec["results"] if r["rule"] == "non_inferior"
          and r["status"] == "inconclusive"]
    assert ni and all(r["delta"] == 0 and r["ci_low"] < -0.05 < 0 < r["ci_high"] for r in ni)
    assert all(r["cases_needed"] == 74 for r in ni)
    assert not [r for r in rec["results"] if r["status"] == "fail"]


def test_an_equivalent_candidate_is_go(runs, tmp_path):
    # margins a 3-4-case set can meet (see the test above: +-0.73 at n = 3)
    proc = run_cli("decide", str(runs["base"]), str(runs["same"]), "gates=default",
                   "gates.gates.0.margin=0.8", "gates.gates.1.margin=0.8",
                   "gates.gates.4.by=estimate", "gates.gates.5.by=estimate",
                   "--question", "Is a rerun the same?", "--name", "rerun", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "decision: GO" in proc.stdout
    rec, md = _record(tmp_path, "rerun")  # default study folder: the current directory
    assert rec["decision"] == "GO" and rec["question"] == "Is a rerun the same?"
    assert rec["gates"]["name"] == "default" and rec["name"] == "rerun"
    assert {r["status"] for r in rec["results"]} <= {"pass", "n/a"}
    ni = [r for r in rec["results"] if r["rule"] == "non_inferior" and r["status"] == "pass"]
    assert {(r["metric"], r["slice"] and r["slice"]["value"]) for r in ni} == {
        ("vital_nugget_recall", None), ("vital_nugget_recall", "yes"),
        ("faithfulness", None), ("faithfulness", "yes")}
    # the critical slice difficulty=hard is absent from the tiny set: shown, with a warning
    assert any("difficulty=hard" in w for w in rec["warnings"])
    assert md.startswith("# Decision: GO (rerun, ")


@pytest.mark.slow  # end to end (CLI runs): in the slow suite
def test_different_metric_versions_exit_3_and_write_nothing(runs, tmp_path):
    proc = run_cli("decide", str(runs["base"]), str(runs["regraded"]), "--study",
                   str(tmp_path / "s"), cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "metric versions differ" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not (tmp_path / "s").exists() and not list(tmp_path.glob("decision-*"))
    # overriding goes on; every gate on an affected family fails, so NO-GO
    proc = run_cli("decide", str(runs["base"]), str(runs["regraded"]),
                   "--allow-version-mismatch", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    rec, _ = _record(tmp_path)
    assert any("metric versions differ" in w for w in rec["warnings"])
    assert any(r["reason"].startswith("not comparable") for r in rec["results"])


@pytest.mark.parametrize("args,message", [
    (["gates=nope"], "gates=nope: unknown gate set (available: default"),
    (["gates=BADFILE"], "gates[1].metric: unknown metric 'faithfullness'"),
    (["gates=default", "gates.confidence=2"], "confidence: Input should be less than 1"),
    (["gates=MISSING.yaml"], "no such gates file"),
    (["--question"], "expected one argument"),
])
def test_bad_gates_exit_2_with_one_line_and_nothing_written(runs, tmp_path, args, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text("gates:\n  - {metric: acl_leak_rate, rule: bound, max: 0}\n"
                   "  - {metric: faithfullness, rule: non_inferior, margin: 0.1}\n")
    args = [a.replace("BADFILE", str(bad)).replace("MISSING", str(tmp_path / "missing"))
            for a in args]
    proc = run_cli("decide", str(runs["base"]), str(runs["leaky"]), *args, "--study",
                   str(tmp_path / "s"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "s").exists() and not list(tmp_path.glob("decision-*"))
    if "argument" not in message:
        assert len(proc.stderr.strip().splitlines()) == 1


def test_missing_runs_exit_2(runs, tmp_path):
    proc = run_cli("decide", str(tmp_path / "nope"), str(runs["leaky"]), cwd=tmp_path)
    assert proc.returncode == 2 and "no such run directory" in proc.stderr
    assert not list(tmp_path.glob("decision-*"))


def test_help_is_fast_and_lists_exit_codes(tmp_path):
    proc = run_cli("decide", "--help", cwd=tmp_path)
    assert proc.returncode == 0 and "Exit 0 GO, 1 NO-GO" in proc.stdout
    assert "4 INCONCLUSIVE" in proc.stdout
    top = run_cli("--help", cwd=tmp_path).stdout
    assert "decide BASELINE CANDIDATE" in top and "plan BASELINE gates=NAME" in top
    plan = run_cli("plan", "--help", cwd=tmp_path)
    assert plan.returncode == 0 and "usage: raglab plan BASELINE gates=NAME" in plan.stdout


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_an_mlflow_candidate_gets_the_decision_tag(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ids = []
    for name, extra in (("base", []), ("leaky", ["system.enforce_acl=false"])):
        proc = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                       f"tracking.uri={uri}", "progress=off", f"hydra.run.dir={tmp_path / name}",
                       f"cache_dir={tmp_path / 'cache'}", *extra, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        ids.append(re.search(r"MLflow run ([0-9a-f]{32})", proc.stdout).group(1))
    proc = run_cli("decide", *ids, "gates=default", "--uri", uri, "--study",
                   str(tmp_path / "study"), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    assert client.get_run(ids[1]).data.tags["raglab.decision"] == "NO-GO"
    assert "raglab.decision" not in client.get_run(ids[0]).data.tags
    arts = {a.path for a in client.list_artifacts(ids[1], "decision")}
    assert any(a.endswith("-default.md") for a in arts)
    rec, _ = _record(tmp_path / "study")
    assert rec["candidate"]["mlflow_run_id"] == ids[1] and rec["candidate"]["run_dir"] is None


def test_a_gate_set_of_your_own_in_the_working_directorys_conf(runs, tmp_path):
    """Issue 32 item 5: ``conf/gates/NAME.yaml`` in the working directory is ``gates=NAME``
    without any flag, as ``conf/dataset/NAME.yaml`` is ``dataset=NAME`` for a run."""
    shipped = Path(__file__).resolve().parents[2] / "conf" / "gates" / "default.yaml"
    (tmp_path / "conf" / "gates").mkdir(parents=True)
    (tmp_path / "conf" / "gates" / "mine.yaml").write_text(shipped.read_text())
    study = tmp_path / "study"
    proc = run_cli("decide", str(runs["base"]), str(runs["leaky"]), "gates=mine",
                   "--study", str(study), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr  # the leaky candidate: NO-GO, as with default
    rec, _ = _record(study, "mine")
    assert rec["decision"] == "NO-GO"
    assert run_cli("decide", str(runs["base"]), str(runs["leaky"]), "gates=nosuch",
                   "--study", str(study), cwd=tmp_path).returncode == 2


@pytest.mark.slow  # end to end (CLI runs): in the slow suite
def test_a_gate_set_copied_from_a_shipped_one_is_read_by_path(runs, tmp_path):
    import shutil
    from pathlib import Path

    conf = Path(__file__).resolve().parents[2] / "conf"
    copy = tmp_path / "my-gates.yaml"
    shutil.copy(conf / "gates" / "default.yaml", copy)  # starts with its defaults list
    proc = run_cli("decide", str(runs["base"]), str(runs["same"]), f"gates={copy}",
                   "gates.gates.0.margin=0.8", "gates.gates.1.margin=0.8",
                   "gates.gates.4.by=estimate", "gates.gates.5.by=estimate", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "decision: GO" in proc.stdout
    other = tmp_path / "extends.yaml"
    other.write_text("defaults:\n  - default\ngates: []\n")
    proc = run_cli("decide", str(runs["base"]), str(runs["same"]), f"gates={other}",
                   cwd=tmp_path)
    assert proc.returncode == 2 and "cannot start from another set" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
