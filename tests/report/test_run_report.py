"""The per-run report: report.md and the PNG plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raglab.errors import UserError
from raglab.report.run_report import ensure_run_report, write_run_report
from tests.tracking.services import make_run_dir

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _edit_metrics(run_dir: Path, fn) -> None:
    path = run_dir / "metrics.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    fn(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_full_report(tmp_path):
    run_dir = make_run_dir(tmp_path / "run", n_intents=4)
    paths = write_run_report(run_dir)
    assert paths == [run_dir / "report.md", run_dir / "report.html",
                     run_dir / "recall_at_k.png", run_dir / "slices.png"]
    for png in paths[2:]:
        assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5000
    md = (run_dir / "report.md").read_text(encoding="utf-8")
    assert md.startswith("# raglab run report: synthetic-0")
    assert "- dataset: demo" in md and "- cases scored: 14" in md
    assert "| final.evidence_recall |" in md and "| final.evidence_recall@5 |" in md
    assert "| correctness | n/a |" in md  # null metric shown, not crashed on
    assert "## Metric versions" in md and "| retrieval | ret0000 |" in md
    assert "| grader_calls | 30 |" in md
    assert "| intent | a\\|b |" not in md  # '/' needs no escaping, '|' would
    assert "| intent | a/b | 3 |" in md and "| source/kind | kb | 10 |" in md
    assert "![recall_at_k](recall_at_k.png)" in md and "![slices](slices.png)" in md
    assert "## All other metrics" in md and "candidate.ndcg@100" in md
    assert not list(run_dir.glob(".*.tmp*"))  # atomic writes leave no temp files


def test_all_null_metrics_write_report_without_plots(tmp_path):
    run_dir = make_run_dir(tmp_path / "run", n_intents=2)
    write_run_report(run_dir)  # first with plots

    def nullify(d):
        d["overall"] = {k: None for k in d["overall"]}
        for values in d["slices"].values():
            for mets in values.values():
                for k in mets:
                    if k != "n":
                        mets[k] = None
        d["work"] = {}
    _edit_metrics(run_dir, nullify)
    paths = write_run_report(run_dir)
    assert paths == [run_dir / "report.md", run_dir / "report.html"]
    assert not (run_dir / "recall_at_k.png").exists()  # stale plot removed
    assert not (run_dir / "slices.png").exists()
    md = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "| final.mrr | n/a |" in md and "## Plots" not in md


def test_minimal_metrics_json(tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps({"overall": {}, "slices": {}}))
    assert write_run_report(tmp_path) == [tmp_path / "report.md", tmp_path / "report.html"]
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "(no headline metric in this run)" in md


def test_only_one_stage_and_partial_slices(tmp_path):
    metrics = {"overall": {"candidate.evidence_recall@10": 0.5, "candidate.evidence_recall@1": 0.1,
                           "final.evidence_recall@5": None, "faithfulness": 0.9},
               "slices": {"lang": {"en": {"n": 3, "faithfulness": 0.8},
                                   "de": {"n": 1, "faithfulness": None}}},
               "metric_versions": {}, "n_cases": 4, "n_quarantined": 0, "errors": 0, "work": {}}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    paths = write_run_report(tmp_path)
    assert [p.name for p in paths] == ["report.md", "report.html", "recall_at_k.png",
                                       "slices.png"]
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "| lang | de | 1 | n/a |" in md and "| lang | en | 3 | 0.8 |" in md


def test_many_slices_are_capped_in_the_plot(tmp_path):
    metrics = {"overall": {"faithfulness": 0.5},
               "slices": {"user": {f"u{i}": {"n": i + 1, "faithfulness": (i % 10) / 10}
                                   for i in range(120)}}}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    paths = write_run_report(tmp_path)
    assert tmp_path / "slices.png" in paths
    assert (tmp_path / "report.md").read_text().count("| user | u") == 120


def test_missing_or_bad_metrics_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="metrics.json: missing"):
        write_run_report(tmp_path)
    (tmp_path / "metrics.json").write_text("{not json")
    with pytest.raises(UserError, match="unreadable"):
        write_run_report(tmp_path)


def test_ensure_reuses_a_current_report_and_rewrites_a_stale_one(tmp_path):
    import os

    run_dir = make_run_dir(tmp_path / "run")
    first = write_run_report(run_dir)
    stamps = {p: p.stat().st_mtime_ns for p in first}
    assert ensure_run_report(run_dir) == first
    assert {p: p.stat().st_mtime_ns for p in first} == stamps  # nothing drawn again
    later = max(stamps.values()) + 10_000_000
    os.utime(run_dir / "metrics.json", ns=(later, later))  # metrics changed since
    again = ensure_run_report(run_dir)
    assert (run_dir / "report.md").stat().st_mtime_ns > stamps[run_dir / "report.md"]
    assert again[0] == run_dir / "report.md"


def test_a_sequential_run_says_cases_run_why_it_stopped_and_each_check(tmp_path):
    run_dir = make_run_dir(tmp_path)
    _edit_metrics(run_dir, lambda m: m.update(sequential={
        "cases_run": 100, "cases_total": 300, "seed": 3, "batch": 20,
        "stopped_because": "every check settled", "gates": "mine", "alpha": 0.05,
        "checks": [
            {"gate": "faithfulness non_inferior", "metric": "faithfulness", "on": "delta",
             "slice": None, "status": "pass", "settled_at": 96, "n": 100,
             "cs_low": -0.048, "cs_high": 0.048, "bet_target": 150.0},
            {"gate": "false_answer_rate bound", "metric": "false_answer_rate", "on": "mean",
             "slice": {"key": "answerable", "value": "no"}, "status": "inconclusive",
             "settled_at": None, "n": 21, "cs_low": 0.0, "cs_high": 0.61,
             "bet_target": 10.5}]}))
    write_run_report(run_dir)
    md = (run_dir / "report.md").read_text(encoding="utf-8")
    head = "sequential: 100 of 300 cases run (every check settled; gate set mine, seed 3"
    assert head in md and "## Sequential run" in md
    assert "| faithfulness non_inferior | change | all | pass | after 96 of 100 paired " \
           "cases |" in md
    assert "| false_answer_rate bound | candidate's mean | answerable=no | inconclusive | " \
           "open after 21 cases |" in md
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert head in html and "<h2>Sequential run</h2>" in html
    assert "after 96 of 100 paired cases" in html and "open after 21 cases" in html
    # a run that is not sequential says nothing of it
    plain = make_run_dir(tmp_path / "plain")
    write_run_report(plain)
    assert "Sequential run" not in (plain / "report.md").read_text(encoding="utf-8")
