"""``raglab label`` through the real CLI on real runs (40 demo cases, no tracking): the sample
reproducible by seed and paired across two runs, a stratified sample, a filled file read
back into metrics.json and the report, a stale label left out, bad files and outputs
refused with one line."""

from __future__ import annotations

import csv
import json
import os
import shutil

import pytest

from tests.conftest import run_cli


def _rows(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _sampled(run):
    return json.loads((run / "labels" / "sample.json").read_text())


def test_the_sample_is_reproducible_by_seed_and_paired_across_runs(runs, tmp_path):
    a, b = runs
    p = run_cli("label", str(a), "--n", "12", "--metrics", "faithfulness,correctness",
                "--seed", "3", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "sampled 12 of 40 cases (seed 3)" in p.stdout
    p = run_cli("label", str(b), "--n", "12", "--metrics", "faithfulness", "--seed", "3",
                cwd=tmp_path)  # labelled one at a time: the same cases
    assert p.returncode == 0, p.stderr
    assert _sampled(a)["sampled"] == _sampled(b)["sampled"]
    assert _sampled(a)["case_set_sha256"] == _sampled(b)["case_set_sha256"]
    rows = _rows(a / "labels" / "to-label.jsonl")
    assert {r["case_id"] for r in rows} <= set(_sampled(a)["sampled"]["all"])
    assert {r["metric"] for r in rows} == {"faithfulness", "correctness"}
    first = rows[0]
    assert first["label"] is None and first["question"] and first["answer"] is not None
    assert "claims" in next(r for r in rows if r["metric"] == "faithfulness")
    # the judge's verdict is not in the file
    assert not {"metrics", "verdicts", "value", "diagnosis"} & set(first)
    # both runs at once: the same cases in both, again the same as one at a time
    c, d = tmp_path / "c", tmp_path / "d"
    shutil.copytree(a, c)
    shutil.copytree(a, d)
    for run in (c, d):
        shutil.rmtree(run / "labels")
    p = run_cli("label", str(c), str(d), "--n", "12", "--metrics", "faithfulness",
                "--seed", "3", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert _sampled(c)["sampled"] == _sampled(d)["sampled"] == _sampled(a)["sampled"]
    p = run_cli("label", str(c), "--n", "12", "--metrics", "faithfulness", "--seed", "4",
                cwd=tmp_path)  # no labels yet: a new seed draws a new sample
    assert p.returncode == 0, p.stderr
    assert _sampled(c)["sampled"] != _sampled(d)["sampled"]


def test_a_stratified_sample_records_its_inclusion_probabilities(runs, tmp_path):
    a, _ = runs
    p = run_cli("label", str(a), "--n", "30", "--metrics", "correctness", "--by",
                "difficulty", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    s = _sampled(a)
    assert s["by"] == "difficulty"
    assert s["population"] == {"easy": 21, "hard": 3, "medium": 16}
    assert {h: len(ids) for h, ids in s["sampled"].items()} == {"easy": 15, "hard": 3,
                                                                "medium": 12}
    assert s["inclusion_probability"] == {"easy": 15 / 21, "hard": 1.0, "medium": 0.75}
    rows = _rows(a / "labels" / "to-label.jsonl")
    assert {r["stratum"] for r in rows} == {"easy", "hard", "medium"}


def _fill(rows, every=4):
    """Labels as a person might give them: mostly yes, every ``every``-th no."""
    return [{**r, "label": "no" if i % every == 0 else "yes"} for i, r in enumerate(rows)]


def test_a_filled_file_gives_human_scale_estimates_and_stale_labels_are_left_out(
        runs, tmp_path):
    from raglab.labels.store import usable_labels
    from raglab.stats.ppi import ppi_mean

    a, _ = runs
    p = run_cli("label", str(a), "--n", "30", "--metrics", "faithfulness,correctness",
                "--seed", "1", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    filled = tmp_path / "filled.jsonl"
    rows = _fill(_rows(a / "labels" / "to-label.jsonl"))
    filled.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = run_cli("label", str(a), "--from", str(filled), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert f"{len(rows)} label(s) read ({len(rows)} new" in p.stdout
    assert "faithfulness: judge" in p.stdout and "human scale" in p.stdout
    m = json.loads((a / "metrics.json").read_text())
    section = m["ppi"]
    assert section["sample"]["seed"] == 1 and section["sample"]["n_sampled"] == 30
    faith = section["metrics"]["faithfulness"]
    n_faith = sum(1 for r in rows if r["metric"] == "faithfulness")
    assert faith["labels"] == {"usable": n_faith, "stale": 0, "missing": 0}
    # the figures are raglab.stats.ppi's on the run's own values
    labels = usable_labels(a, "faithfulness")
    recs = {r["case_id"]: r for r in _rows(a / "records.jsonl")}
    judge = {c: r["metrics"]["faithfulness"] for c, r in recs.items()
             if r["metrics"]["faithfulness"] is not None}
    ids = sorted(labels.values)
    want = ppi_mean([labels.values[c] for c in ids], [judge[c] for c in ids],
                    list(judge.values()), bounds=(0.0, 1.0))
    got = faith["overall"]
    assert got["estimate"] == pytest.approx(want.estimate, abs=1e-12)
    assert (got["ci_low"], got["ci_high"]) == pytest.approx((want.ci_low, want.ci_high))
    assert got["judge_mean"] == pytest.approx(m["overall"]["faithfulness"])
    assert got["n_all"] == len(judge) and got["stratified"] is False
    # --plan: raglab.stats.ppi_plan.labels_needed on the same values
    from raglab.stats.ppi_plan import labels_needed

    plan = labels_needed([labels.values[c] for c in ids], [judge[c] for c in ids],
                         list(judge.values()), width=0.3)
    p = run_cli("label", str(a), "--plan", "--metrics", "faithfulness", "--width", "0.3",
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (f"faithfulness: {plan.labels_needed} labels for an interval 0.3 wide"
            if plan.labels_needed else "faithfulness: an interval 0.3 wide is out of reach") \
        in p.stdout
    report = (a / "report.md").read_text()
    assert "## Human scale (prediction-powered estimates)" in report
    assert "Human scale" in (a / "report.html").read_text()
    # an answer changes (the case was run again): its labels are stale, never used
    changed = next(r["case_id"] for r in rows if r["metric"] == "faithfulness")
    lines = _rows(a / "records.jsonl")
    for r in lines:
        if r["case_id"] == changed:
            r["output"]["answer"] += " Also something new."
    (a / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    p = run_cli("label", str(a), "--from", str(filled), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "(0 new, 0 changed" in p.stdout  # the same file again: nothing new
    faith = json.loads((a / "metrics.json").read_text())["ppi"]["metrics"]["faithfulness"]
    assert faith["labels"] == {"usable": n_faith - 1, "stale": 1, "missing": 0}
    assert faith["overall"]["n_labelled"] == n_faith - 1
    assert changed not in usable_labels(a, "faithfulness").values
    # a spreadsheet's CSV with only case_id, metric, label: the current answer's label
    sheet = tmp_path / "sheet.csv"
    with open(sheet, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["case_id", "metric", "label"])
        w.writerow([changed, "faithfulness", "partial"])
    p = run_cli("label", str(a), "--from", str(sheet), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "taken as labels of the run's current answers" in p.stdout
    assert usable_labels(a, "faithfulness").values[changed] == 0.5


BAD_ROWS = [
    ({"label": "maybe"}, "label 'maybe' is not 1/0"),
    ({"case_id": "no-such-case"}, "no such case in the run"),
    ({"metric": "final.mrr"}, "metric 'final.mrr' is not judged by a grader"),
    ({"label": 2}, "label 2 is outside [0, 1]"),
    ({"label": int("9" * 400)}, "label (a number of 400 digits) is outside [0, 1]"),
]


def test_a_bad_filled_file_is_one_line_naming_file_line_and_case(runs, tmp_path):
    a, _ = runs
    p = run_cli("label", str(a), "--n", "10", "--metrics", "correctness", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    for i, (row, message) in enumerate(BAD_ROWS):
        rows = _fill(_rows(a / "labels" / "to-label.jsonl"))
        bad = tmp_path / f"bad{i}.jsonl"
        rows[i + 1].update(row)
        bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
        p = run_cli("label", str(a), "--from", str(bad), cwd=tmp_path)
        assert p.returncode == 2, message
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
        assert f"{bad}:{i + 2} case {rows[i + 1]['case_id']}: {message}" in p.stderr
        assert not (a / "labels" / "labels.jsonl").exists()  # nothing stored


@pytest.mark.slow     # the bad-row refusals of --from stay in the default run
def test_labels_outside_the_sample_and_bad_outputs_are_refused(runs, tmp_path):
    a, _ = runs
    p = run_cli("label", str(a), "--n", "5", "--metrics", "correctness", "--seed", "2",
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    sampled = set(_sampled(a)["sampled"]["all"])
    outside = next(r["case_id"] for r in _rows(a / "records.jsonl")
                   if r["case_id"] not in sampled)
    f = tmp_path / "outside.jsonl"
    f.write_text(json.dumps({"case_id": outside, "metric": "correctness", "label": 1}) + "\n")
    p = run_cli("label", str(a), "--from", str(f), cwd=tmp_path)
    assert p.returncode == 2 and f"{f}:1 case {outside}: not in the run's sample" in p.stderr
    # outputs: never a run's own file, never a directory or a FIFO
    for out, says in ((a / "records.jsonl", "that is an input of this command"),
                      (tmp_path, "is a directory, not a regular file")):
        p = run_cli("label", str(a), "--n", "5", "--metrics", "correctness", "--seed", "2",
                    "--out", str(out), cwd=tmp_path)
        assert p.returncode == 2 and says in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
    other = tmp_path / "notes.jsonl"
    other.write_text(json.dumps({"id": "x", "note": "someone's file"}) + "\n")
    p = run_cli("label", str(a), "--n", "5", "--metrics", "correctness", "--seed", "2",
                "--out", str(other), cwd=tmp_path)
    assert p.returncode == 2 and "line 1 is not a labelling row" in p.stderr
    assert "someone's file" in other.read_text()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    p = run_cli("label", str(a), "--n", "5", "--metrics", "correctness", "--seed", "2",
                "--out", str(fifo), cwd=tmp_path)
    assert p.returncode == 2 and "is a FIFO, not a regular file" in p.stderr
    # a labelling file holding labels not read back is never overwritten
    todo = a / "labels" / "to-label.jsonl"
    rows = _fill(_rows(todo))
    todo.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = todo.read_bytes()
    p = run_cli("label", str(a), "--n", "8", "--metrics", "correctness", "--seed", "2",
                cwd=tmp_path)
    assert p.returncode == 2 and "label(s) not read back yet" in p.stderr
    assert todo.read_bytes() == before
    # once read back, the sample may grow with the same seed (a different one is refused)
    assert run_cli("label", str(a), "--from", str(todo), cwd=tmp_path).returncode == 0
    p = run_cli("label", str(a), "--review", cwd=tmp_path)
    assert p.returncode == 0 and "nothing to label" in p.stdout
    p = run_cli("label", str(a), "--n", "8", "--metrics", "correctness", "--seed", "9",
                cwd=tmp_path)
    assert p.returncode == 2 and "draw with --seed 2" in p.stderr
    p = run_cli("label", str(a), "--n", "8", "--metrics", "correctness", "--seed", "2",
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert sampled <= set(_sampled(a)["sampled"]["all"])
    grown = _rows(todo)
    assert sum(1 for r in grown if r["label"] is not None) == len(rows)  # kept


@pytest.mark.slow
def test_the_estimates_reach_the_runs_mlflow_run(tmp_path):
    """A tracked run (MLflow on sqlite): labels read after the run log the human-scale
    figures and the new metrics.json to the run's own MLflow run."""
    from mlflow.tracking import MlflowClient

    from raglab.data.dataset import resolve_path

    cases = resolve_path("pkg://raglab/datasets/demo/cases.jsonl").read_text().splitlines()[:40]
    (tmp_path / "cases40.jsonl").write_text("\n".join(cases) + "\n")
    run = tmp_path / "tracked"
    p = run_cli("run", f"dataset.cases={tmp_path / 'cases40.jsonl'}", "dataset.labels=null",
                f"hydra.run.dir={run}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    p = run_cli("label", str(run), "--n", "30", "--metrics", "faithfulness", "--seed", "1",
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    todo = run / "labels" / "to-label.jsonl"
    todo.write_text("".join(json.dumps(r) + "\n" for r in _fill(_rows(todo))))
    store = tmp_path / "mlflow.db"
    store.rename(tmp_path / "away.db")  # the tracking store is down
    p = run_cli("label", str(run), "--from", str(todo), cwd=tmp_path)
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert f"raglab label {run} --update once the store is back" in p.stderr
    assert "ppi" in json.loads((run / "metrics.json").read_text())  # the files are written
    (tmp_path / "away.db").rename(store)
    p = run_cli("label", str(run), "--update", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    tracked = json.loads((run / "run.json").read_text())["mlflow"]
    assert f"MLflow run {tracked['run_id']}:" in p.stdout
    est = json.loads((run / "metrics.json").read_text())["ppi"]["metrics"]["faithfulness"]
    logged = MlflowClient(tracked["uri"]).get_run(tracked["run_id"])
    m = logged.data.metrics
    assert m["ppi.faithfulness.estimate"] == pytest.approx(est["overall"]["estimate"])
    assert m["ppi.faithfulness.ci_low"] == pytest.approx(est["overall"]["ci_low"])
    assert m["ppi.faithfulness.judge_mean"] == pytest.approx(est["overall"]["judge_mean"])
    assert logged.data.tags["raglab.labels"] == "faithfulness"
    artifact = MlflowClient(tracked["uri"]).download_artifacts(tracked["run_id"],
                                                               "metrics.json", str(tmp_path))
    assert "ppi" in json.loads(open(artifact).read())
