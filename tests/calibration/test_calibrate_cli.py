"""``raglab calibrate`` end to end (real subprocesses): the offline grader on the demo
labels, bad labels, and the records ``raglab run`` shows next to each version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raglab.data.dataset import resolve_path
from raglab.stats.agreement import cohen_kappa
from tests.conftest import run_cli

DEMO_LABELS = resolve_path("pkg://raglab/datasets/demo/labels.jsonl")
CLAIMS = ["SUPPORTED", "CONTRADICTED", "NOT_FOUND"]


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
def test_offline_grader_on_demo_labels(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    p = run_cli("calibrate", "dataset=demo", f"cache_dir={tmp_path / 'cache'}",
                f"tracking.uri={uri}",
                f"hydra.run.dir={tmp_path / 'cal'}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    out = p.stdout
    assert "claims " in out and "nuggets " in out and "95% CI" in out
    assert "claims confusion (rows human, columns grader):" in out
    assert "nuggets confusion (rows human, columns grader):" in out
    doc = json.loads((tmp_path / "cal" / "calibration.json").read_text())
    assert (tmp_path / "cal" / "calibration.md").read_text().startswith("# Calibration")
    assert doc["claims"]["n"] == 157 and doc["nuggets"]["n"] == 72
    for sec in ("claims", "nuggets"):
        s = doc[sec]
        assert s["ci_low"] < s["kappa"] < s["ci_high"]
        assert f"{s['kappa']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]" in out
        assert sum(map(sum, s["confusion"]["counts"])) == s["n"]
        assert 0 <= s["leniency"]["value"] <= 1
    assert doc["nuggets"]["weighted_kappa"]["value"] > doc["nuggets"]["kappa"]
    # anyone can recompute the figures from the items
    items = [i for i in doc["items"] if i["kind"] == "claim"]
    assert len(doc["items"]) == 229 and {"case_id", "kind", "human", "grader"} <= set(items[0])
    code = {n: i for i, n in enumerate(CLAIMS)}
    assert cohen_kappa([code[i["human"]] for i in items], [code[i["grader"]] for i in items],
                       3) == pytest.approx(doc["claims"]["kappa"])
    sup = [i for i in items if i["human"] != "SUPPORTED"]
    assert doc["claims"]["leniency"]["value"] == pytest.approx(
        sum(i["grader"] == "SUPPORTED" for i in sup) / len(sup))

    # MLflow: experiment raglab-calibration, tagged with every family's version and the labels hash
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("raglab-calibration")
    (run,) = client.search_runs([exp.experiment_id])
    tags = run.data.tags
    for fam, ver in doc["versions"].items():
        assert tags[f"raglab.metric_version.{fam}"] == ver
    assert tags["raglab.labels_sha256"] == doc["labels"]["sha256"]
    assert run.data.metrics["claims.kappa"] == pytest.approx(doc["claims"]["kappa"])

    # the record is found through cache_dir, and through the tracking store alone
    from raglab.calibration.records import lookup

    shown = lookup(doc["versions"], tmp_path / "cache")
    assert shown["faithfulness"].startswith(f"kappa {doc['claims']['kappa']:.2f}")
    assert shown["nuggets"].startswith(f"kappa {doc['nuggets']['kappa']:.2f}")
    assert shown["relevance"] == "uncalibrated" and shown["retrieval"] == "not graded"
    assert lookup(doc["versions"], tmp_path / "empty") ["faithfulness"] == "uncalibrated"
    from raglab.tracking.standalone import calibration_finder

    assert lookup(doc["versions"], tmp_path / "empty", calibration_finder(uri))["faithfulness"] \
        == shown["faithfulness"]

    # repeats with the offline grader: one call per judgment, agreement 1.0
    p2 = run_cli("calibrate", "dataset=demo", "repeats=3", f"cache_dir={tmp_path / 'cache2'}",
                 "tracking=none",
                 f"hydra.run.dir={tmp_path / 'cal2'}", cwd=tmp_path)
    assert p2.returncode == 0, p2.stderr[-2000:]
    doc2 = json.loads((tmp_path / "cal2" / "calibration.json").read_text())
    assert doc2["work"]["grader_calls"] == doc["work"]["grader_calls"]
    assert doc2["self_consistency"]["claims"]["fleiss_kappa"] == 1.0
    assert doc2["self_consistency"]["independent"] == 1 and doc2["repeats"] == 3
    assert doc2["claims"]["kappa"] == doc["claims"]["kappa"]
    assert "deterministic grader" in p2.stdout

    # the records side by side
    p3 = run_cli("calibrate", "--versions", f"cache_dir={tmp_path / 'cache'}", cwd=tmp_path)
    assert p3.returncode == 0, p3.stderr
    assert doc["versions"]["faithfulness"] in p3.stdout and "labels.jsonl@" in p3.stdout
    assert f"{doc['claims']['kappa']:.3f}" in p3.stdout


def _labels(tmp_path: Path, edit) -> Path:
    rows = [json.loads(x) for x in DEMO_LABELS.read_text().splitlines()[:12]]
    edit(rows)
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("what,edit,needle", [
    ("label", lambda rows: rows[4].update(label="MAYBE"), "'MAYBE' is not valid"),
    ("context", lambda rows: rows[6].update(context=[]), "without context"),
    ("item", lambda rows: rows[2].update(item="   "), "empty item"),
])
def test_bad_labels_exit_2_and_nothing_written(tmp_path, what, edit, needle):
    labels = _labels(tmp_path, edit)
    line = {"label": 5, "context": 7, "item": 3}[what]
    p = run_cli("calibrate", f"dataset.labels={labels}", f"cache_dir={tmp_path / 'cache'}",
                "tracking=none", f"hydra.run.dir={tmp_path / 'cal'}", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and f"{labels}:{line}" in err[0] and needle in err[0], p.stderr
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "cal").exists()
    assert not (tmp_path / "cache" / "calibration").exists()


def test_run_repeats_with_offline_grader_are_one_call(tmp_path, tiny):
    corpus, cases = tiny
    base = ["run", f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null",
            "tracking=none", "progress=off"]
    p1 = run_cli(*base, f"cache_dir={tmp_path / 'c1'}", f"hydra.run.dir={tmp_path / 'r1'}",
                 cwd=tmp_path)
    p3 = run_cli(*base, "grader.repeats=3", f"cache_dir={tmp_path / 'c3'}",
                 f"hydra.run.dir={tmp_path / 'r3'}", cwd=tmp_path)
    assert p1.returncode == 0 and p3.returncode == 0, p1.stderr + p3.stderr
    m1 = json.loads((tmp_path / "r1" / "metrics.json").read_text())
    m3 = json.loads((tmp_path / "r3" / "metrics.json").read_text())
    assert m3["work"]["grader_calls"] == m1["work"]["grader_calls"] > 0
    assert m3["metric_versions"] == m1["metric_versions"]  # repeats: not part of a version
    assert m3["overall"] == m1["overall"] or all(
        m3["overall"][k] == m1["overall"][k] for k in m1["overall"] if "latency" not in k)
    recs = [json.loads(x) for x in (tmp_path / "r3" / "records.jsonl").read_text().splitlines()]
    graded = [r for r in recs if r["graded"]]
    assert graded and all(r["repeats"] == 3 for r in graded)
    assert all(set(r["repeat_variance"].values()) <= {0.0} for r in graded)
    assert "uncalibrated" in p3.stdout and "metric versions (calibration):" in p3.stdout
    from raglab.calibration.records import lookup

    shown = lookup(m3["metric_versions"], tmp_path / "c3")
    assert shown["retrieval"] == "not graded" and shown["faithfulness"] == "uncalibrated"
    assert set(shown) == set(m3["metric_versions"])


def test_fail_on_quarantine(tmp_path, tiny):
    corpus, cases = tiny
    rows = [json.loads(x) for x in cases.read_text().splitlines()]
    rows[1]["evidence"][0]["quote"] = "this sentence is in no document at all"
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ["run", f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null",
            "tracking=none", "progress=off", f"cache_dir={tmp_path / 'c'}"]
    p = run_cli(*base, "fail_on_quarantine=true", f"hydra.run.dir={tmp_path / 'r'}",
                cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "t-2" in p.stderr and "fail_on_quarantine=true: 1 quarantined" in p.stderr
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "r" / "records.jsonl").exists()
    assert not (tmp_path / "r" / "metrics.json").exists()
    assert [q["case_id"] for q in map(json.loads, (tmp_path / "r" / "quarantine.jsonl")
                                      .read_text().splitlines())] == ["t-2"]


def test_calibrate_without_labels_refuses_rather_than_taking_the_demos(tmp_path):
    p = run_cli("calibrate", "tracking=none", f"cache_dir={tmp_path / 'cache'}", cwd=tmp_path,
                timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    (line,) = p.stderr.strip().splitlines()
    assert "dataset.labels=FILE" in line and "dataset=demo" in line
    assert not (tmp_path / "cache").exists() and not (tmp_path / "outputs").exists()
    # the cases of another dataset with the demo's labels left in place: refused too
    p = run_cli("calibrate", "tracking=none", "dataset.cases=mine.jsonl", cwd=tmp_path,
                timeout=60)
    assert p.returncode == 2 and "dataset.labels=FILE" in p.stderr
