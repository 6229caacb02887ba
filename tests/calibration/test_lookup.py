"""Calibration records by family version: what run and compare show next to versions."""

from __future__ import annotations

from raglab.calibration.records import append_record, lookup, version_lines, versions_table

VERSIONS = {"retrieval": "r1", "faithfulness": "f1", "citations": "c1", "correctness": "k1",
            "relevance": "v1", "nuggets": "n1", "abstention": "a1", "diagnosis": "d1"}


def _record(versions, kappa, created="2026-12-01T09:00:00+00:00"):
    return {"created": created, "grader": "claude", "versions": versions, "repeats": 1,
            "labels": {"path": "labels.jsonl", "sha256": "ab" * 32, "n": 10},
            "claims": {"n": 6, "kappa": kappa, "ci_low": kappa - 0.1, "ci_high": kappa + 0.1,
                       "leniency": 0.2},
            "nuggets": {"n": 4, "kappa": 0.5, "ci_low": 0.3, "ci_high": 0.7, "leniency": 0.0,
                        "weighted_kappa": {"value": 0.6, "ci_low": 0.4, "ci_high": 0.8}},
            "self_consistency": {}, "run_dir": "x", "mlflow_run_id": None}


def test_latest_record_of_each_version_wins(tmp_path):
    append_record(tmp_path, _record(VERSIONS, 0.40))
    append_record(tmp_path, _record(VERSIONS, 0.45, "2026-12-01T10:00:00+00:00"))
    shown = lookup(VERSIONS, tmp_path)
    assert shown["faithfulness"] == "kappa 0.45 [0.35, 0.55] (6 claim labels)"
    assert shown["citations"] == shown["correctness"] == shown["faithfulness"]
    assert shown["nuggets"] == "kappa 0.50 [0.30, 0.70] (4 nugget labels)"
    assert shown["relevance"] == shown["abstention"] == "uncalibrated"
    assert shown["retrieval"] == shown["diagnosis"] == "not graded"
    changed = dict(VERSIONS, faithfulness="f2")  # one prompt word: a new version
    assert lookup(changed, tmp_path)["faithfulness"] == "uncalibrated"
    assert lookup(changed, tmp_path)["nuggets"] == shown["nuggets"]
    table = versions_table([_record(VERSIONS, 0.40), _record(VERSIONS, 0.45)])
    assert len(table.splitlines()) == 2 and "0.450 [0.350, 0.550]" in table


def test_compare_lines_show_both_versions_when_they_differ(tmp_path):
    append_record(tmp_path, _record(VERSIONS, 0.40))
    cand = dict(VERSIONS, faithfulness="f2")
    lines = version_lines(VERSIONS, cand, tmp_path)
    faith = next(ln for ln in lines if ln.strip().startswith("faithfulness"))
    assert "baseline f1 kappa 0.40" in faith and "candidate f2 uncalibrated" in faith
    nug = next(ln for ln in lines if ln.strip().startswith("nuggets"))
    assert nug.split() == ["nuggets", "n1", "kappa", "0.50", "[0.30,", "0.70]", "(4", "nugget",
                           "labels)"]
