"""Decisions where a change moves a few cases, through the CLI: the figures of the issue's
"done when" (docs/statistics.md)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli


def _run(root: Path, name: str, n: int, lost: int = 0) -> Path:
    d = root / name
    d.mkdir()
    with open(d / "records.jsonl", "w", encoding="utf-8") as fh:
        for i in range(n):
            hit = 0.0 if i < lost else 1.0
            fh.write(json.dumps({"case_id": f"c{i:03d}", "tags": {"intent": "x"},
                                 "gold": {"answerable": True}, "output": {"answer": "a"},
                                 "metrics": {"final.hit_rate@5": hit}, "error": None}) + "\n")
    (d / "metrics.json").write_text(json.dumps({
        "overall": {}, "slices": {}, "metric_versions": {"retrieval": "r1"}, "n_cases": n}))
    return d


def test_two_lost_of_a_hundred_is_inconclusive_for_non_inferiority_at_005(tmp_path):
    # a loss rate of 0.05 is not excluded (P(X <= 2 | Bin(100, 0.05)) = 0.118), nor shown
    base, cand = _run(tmp_path, "base", 100), _run(tmp_path, "cand", 100, lost=2)
    gates = tmp_path / "gates.yaml"
    gates.write_text("gates:\n  - {metric: final.hit_rate@5, rule: non_inferior, "
                     "margin: 0.05}\n")
    proc = run_cli("decide", str(base), str(cand), f"gates={gates}", "--study",
                   str(tmp_path / "study"), cwd=tmp_path)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "decision: INCONCLUSIVE" in proc.stdout
    (record,) = (tmp_path / "study").glob("decision-*.json")
    (check,) = json.loads(record.read_text())["results"]
    assert check["status"] == "inconclusive" and check["ci_low"] < -0.05 < check["ci_high"]
    assert check["settles_as"] == "pass" and check["cases_needed"] > 100
    assert check["underpowered"] is True            # and says why a pass would be weak


def test_two_identical_runs_of_fifty_cases_have_an_interval_around_zero(tmp_path):
    base, same = _run(tmp_path, "base", 50), _run(tmp_path, "same", 50)
    proc = run_cli("compare", str(base), str(same), "--out", str(tmp_path / "cmp"),
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads((tmp_path / "cmp" / "compare.json").read_text())["rows"]
    (row,) = [r for r in rows if r["metric"] == "final.hit_rate@5" and r["slice"] is None]
    assert row["delta"] == 0 and row["ci_low"] < 0 < row["ci_high"]
    # about Tango's z^2 / (n + z^2) = 0.0713; 0.0730 with the continuity correction
    assert abs(row["ci_high"] - 1.959964 ** 2 / (50 + 1.959964 ** 2)) < 0.002
    assert abs(row["ci_high"] - 0.073031) < 1e-5
    assert row["mde"] is not None and row["mde"] > 0


def test_a_cluster_tag_no_case_carries_is_refused_in_one_line(tmp_path):
    base, same = _run(tmp_path, "base", 20), _run(tmp_path, "same", 20, lost=3)
    proc = run_cli("compare", str(base), str(same), "--set", "cluster=intnet", "--out",
                   str(tmp_path / "cmp"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no case has the tag 'intnet' (tags: intent)" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "cmp").exists()
    ok = run_cli("compare", str(base), str(same), "--set", "cluster=intent", "--out",
                 str(tmp_path / "cmp"), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr


def test_adjusted_p_is_never_below_the_raw_p(tmp_path):
    base, cand = _run(tmp_path, "base", 120), _run(tmp_path, "cand", 120, lost=9)
    proc = run_cli("compare", str(base), str(cand), "--out", str(tmp_path / "cmp"),
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads((tmp_path / "cmp" / "compare.json").read_text())["rows"]
    tested = [r for r in rows if r["p_value"] is not None and r["p_adjusted"] is not None]
    assert tested and any(r["aliases"] for r in tested)
    assert all(r["p_adjusted"] >= r["p_value"] for r in tested)


def _abstention_run(root: Path, name: str, answered: set[int], n: int = 6) -> Path:
    d = root / name
    d.mkdir()
    with open(d / "records.jsonl", "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"case_id": f"u{i}", "tags": {"intent": "x"},
                                 "gold": {"answerable": False}, "output": {"answer": "a"},
                                 "metrics": {"false_answer_rate": 1.0 if i in answered
                                             else 0.0}, "error": None}) + "\n")
    mean = len(answered) / n
    (d / "metrics.json").write_text(json.dumps({
        "overall": {"false_answer_rate": mean}, "slices": {},
        "metric_versions": {"abstention": "a1"}, "n_cases": n}))
    return d


def test_a_bound_gate_on_six_cases_is_underpowered_and_the_verdict_says_so(tmp_path):
    """The issue's case: false_answer_rate bound, n = 6, one changed case, interval
    [+0, +1]: NO-GO, underpowered, and the verdict line says it turns on one case."""
    base = _abstention_run(tmp_path, "base", set())
    cand = _abstention_run(tmp_path, "cand", {0})
    gates = tmp_path / "gates.yaml"
    gates.write_text("gates:\n  - {metric: false_answer_rate, rule: bound, max: 0.5, "
                     "max_increase: 0.05}\n")
    proc = run_cli("decide", str(base), str(cand), f"gates={gates}", "--study",
                   str(tmp_path / "study"), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "note: This NO-GO turns on 1 changed case" in proc.stdout
    (record,) = (tmp_path / "study").glob("decision-*.json")
    rec = json.loads(record.read_text())
    (check,) = rec["results"]
    assert check["n"] == 6 and check["changed"] == 1 and check["underpowered"] is True
    assert check["status"] == "fail" and "underpowered" in check["reason"]
    assert rec["turns_on"]["changed"] == 1
    assert any("false_answer_rate bound [overall] is underpowered" in w for w in rec["warnings"])
    md = record.with_suffix(".md").read_text()
    verdict = md.split("**Decision: NO-GO.**", 1)[1].split("\n\n", 1)[0]
    assert "This NO-GO turns on 1 changed case" in verdict
    assert "false_answer_rate bound [overall]: 1 of 6 paired cases changed" in verdict
