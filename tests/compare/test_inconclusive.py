"""GO, NO-GO or INCONCLUSIVE through the CLI, on replayed pairs with known differences, and
how many cases an inconclusive check needs (raglab.stats.settle), checked by deciding on
that many cases; ``raglab plan`` before a candidate exists."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from raglab.compare.record import inconclusive_note
from raglab.pytest_plugin import Decision, assert_go
from raglab.stats.settle import Basis, Condition, cases_to_settle, projected
from tests.conftest import run_cli

GATES = "gates:\n  - {metric: final.hit_rate@5, rule: non_inferior, margin: 0.05}\n"


def _run(root: Path, name: str, n: int, lost: int = 0) -> Path:
    """A run of ``n`` pass/fail cases whose first ``lost`` fail (the others pass)."""
    d = root / name
    d.mkdir()
    with open(d / "records.jsonl", "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"case_id": f"c{i:04d}", "tags": {"intent": "x"},
                                "gold": {"answerable": True}, "output": {"answer": "a"},
                                "metrics": {"final.hit_rate@5": 0.0 if i < lost else 1.0},
                                "error": None}) + "\n")
    (d / "metrics.json").write_text(json.dumps({
        "overall": {}, "slices": {}, "metric_versions": {"retrieval": "r1"}, "n_cases": n}))
    return d


def _decide(tmp_path: Path, n: int, lost: int, *extra: str, env=None):
    root = tmp_path / f"n{n}-lost{lost}"
    root.mkdir()
    base, cand = _run(root, "base", n), _run(root, "cand", n, lost)
    gates = root / "gates.yaml"
    gates.write_text(GATES)
    proc = run_cli("decide", str(base), str(cand), f"gates={gates}", "--study",
                   str(root / "study"), *extra, cwd=root, env=env)
    records = list((root / "study").glob("decision-*.json"))
    rec = json.loads(records[0].read_text()) if records else None
    return proc, rec, root


def test_identical_runs_of_30_are_inconclusive_and_say_what_it_would_take(tmp_path):
    summary = tmp_path / "summary.md"
    proc, rec, root = _decide(tmp_path, 30, 0, "--junit", "junit.xml", "--comment",
                              "comment.md", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert rec["decision"] == "INCONCLUSIVE" and "decision: INCONCLUSIVE" in proc.stdout
    (check,) = rec["results"]
    assert check["status"] == "inconclusive" and check["settles_as"] == "pass"
    assert check["cases_needed"] == 74 and rec["counts"]["inconclusive"] == 1
    assert "74 paired cases would settle it (pass)" in proc.stdout
    # the Markdown (and so the HTML) record, the job summary, the annotation and JUnit
    (md,) = (root / "study").glob("decision-*.md")
    assert "## What it would take" in md.read_text() and "74 would settle it" in md.read_text()
    (html,) = (root / "study").glob("decision-*.html")
    assert "What it would take" in html.read_text()
    assert "## raglab decide: INCONCLUSIVE" in summary.read_text()
    assert "74 paired cases would settle it" in (root / "comment.md").read_text()
    warnings = [x for x in proc.stdout.splitlines() if x.startswith("::warning ")]
    assert len(warnings) == 1 and "74 paired cases would settle it" in warnings[0]
    assert "::error" not in proc.stdout
    suite = ET.parse(root / "junit.xml").getroot()
    assert suite.get("failures") == "0" and suite.get("skipped") == "1"
    skipped = suite.find("testcase/skipped")
    assert skipped is not None and skipped.get("message").startswith("inconclusive: 30 ")
    props = {p.get("name"): p.get("value") for p in suite.findall("testcase/properties/property")}
    assert props == {"status": "inconclusive", "cases_needed": "74"}
    # the pytest helper fails on it, with what it would take, unless accepted
    decision = Decision(rec["decision"], proc.returncode, rec, root / "d.json")
    with pytest.raises(AssertionError, match="30 paired cases now; 74 paired cases would"):
        assert_go(decision)
    assert_go(decision, accept_inconclusive=True)
    assert "no evidence that it is breached" in inconclusive_note(rec)
    assert "would fail with more cases" not in inconclusive_note(rec)


@pytest.mark.slow  # four decisions end to end (the identical-30 one above is in the default run)
@pytest.mark.parametrize("n,lost,code,decision", [
    (74, 0, 0, "GO"),               # identical runs of cases_needed cases
    (37, 0, 4, "INCONCLUSIVE"),     # half as many
    (200, 20, 1, "NO-GO"),          # 20 losses of 200: the drop is shown
    (40, 3, 4, "INCONCLUSIVE"),     # 3 losses of 40: neither shown
])
def test_each_outcome_on_replayed_pairs(tmp_path, n, lost, code, decision):
    proc, rec, _ = _decide(tmp_path, n, lost)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert rec["decision"] == decision
    (check,) = rec["results"]
    if decision == "INCONCLUSIVE":
        assert check["cases_needed"] > n
    else:
        assert check["cases_needed"] is None


def test_cases_needed_is_what_it_takes_for_a_change_seen():
    # 3 losses of 40: the drop of 0.075 would be shown at N cases, not at N - 1
    b = Basis(40, -0.075, -0.2, 0.02, 0.95, (0.0, 3.0, 40.0))
    (n, outcome) = cases_to_settle(b, [Condition("above", -0.05)])
    assert outcome == "fail"
    assert projected(b, n)[1] < -0.05 <= projected(b, n - 1)[1]
    # with nothing changed: the least N whose interval of no change fits in +-0.05
    # (+-0.0506 at 73, +-0.04996 at 74)
    zero = Basis(30, 0.0, -0.12, 0.12, 0.95, (0.0, 0.0, 30.0))
    assert cases_to_settle(zero, [Condition("above", -0.05)]) == (74, "pass")
    assert cases_to_settle(zero, [Condition("above", -0.05)], after=0) == (74, "pass")
    # an interval that is not a score interval shrinks as sqrt(n / N) about its estimate
    t = Basis(100, 0.01, -0.05, 0.07, 0.95)
    assert projected(t, 400) == pytest.approx((0.01 - 0.03, 0.01 + 0.03))


def test_plan_lists_each_check_with_cases_now_the_mde_and_cases_needed(tmp_path):
    base = _run(tmp_path, "base", 30)
    gates = tmp_path / "gates.yaml"
    gates.write_text(GATES + "  - {metric: final.hit_rate@5, rule: not_worse}\n"
                     "  - {metric: final.hit_rate@5, rule: bound, min: 0.5}\n")
    proc = run_cli("plan", str(base), f"gates={gates}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "raglab plan: base (gates gates): 30 cases"
    ni, nw, bound = lines[2:5]
    assert ni.startswith("  final.hit_rate@5 non_inferior [overall]: 30 cases now; smallest "
                         "change detectable ")
    assert ni.endswith("the margin 0.05 needs 74 cases (44 more)")
    assert "never waits for cases" in nw and "candidate's own figures" in bound
    more = run_cli("plan", str(base), f"gates={gates}", "--changed", "0.1", cwd=tmp_path)
    assert "the margin 0.05 needs 192 cases (162 more)" in more.stdout
    bad = run_cli("plan", str(base), f"gates={gates}", "--changed", "nan", cwd=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # two demo runs end to end
def test_two_identical_demo_runs_under_the_default_gates_are_never_no_go(tmp_path):
    for name in ("a", "b"):
        proc = run_cli("run", f"hydra.run.dir={tmp_path / name}", "tracking=none",
                       "progress=off", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    proc = run_cli("decide", str(tmp_path / "a"), str(tmp_path / "b"), "gates=default",
                   "--study", str(tmp_path / "study"), cwd=tmp_path)
    assert proc.returncode in (0, 4), proc.stdout + proc.stderr
    (path,) = (tmp_path / "study").glob("decision-*.json")
    rec = json.loads(path.read_text())
    assert rec["decision"] == "INCONCLUSIVE" and rec["counts"]["fail"] == 0
    hard = [r for r in rec["results"] if r["slice"] == {"key": "difficulty", "value": "hard"}]
    assert hard and all(r["status"] == "inconclusive" and r["cases_needed"] == 74
                        for r in hard)
    plan = run_cli("plan", str(tmp_path / "a"), "gates=default", cwd=tmp_path)
    assert plan.returncode == 0
    assert "[difficulty=hard]: 23 cases now" in plan.stdout
    assert "the margin 0.05 needs 74 cases (51 more)" in plan.stdout


def _table_runs(rng, n, weights=None):
    """Two runs of ``n`` cases with a pass/fail metric (a few changed) and a graded share
    (a few cases changed by small and large steps)."""
    from raglab.compare.comparison import RunSource

    hit_b = (rng.random(n) < 0.7).astype(float)
    hit_c = np.where(rng.random(n) < 0.08, 1.0 - hit_b, hit_b)
    f_b = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=n)
    step = rng.choice([-0.5, -0.03, 0.02, 0.25], size=n)
    f_c = np.clip(np.where(rng.random(n) < 0.12, f_b + step, f_b), 0.0, 1.0)
    runs = []
    for label, hit, faith in (("b", hit_b, f_b), ("c", hit_c, f_c)):
        records = []
        for i in range(n):
            r = {"case_id": f"c{i}", "tags": {"tier": "x"}, "gold": {"answerable": True},
                 "output": {"answer": "a"}, "error": None,
                 "metrics": {"final.hit_rate@1": float(hit[i]), "faithfulness": float(faith[i])}}
            if weights is not None:
                r["weight"] = float(weights[i])
            records.append(r)
        metrics = {"metric_versions": {"retrieval": "r1", "faithfulness": "f1"},
                   "n_cases": n}
        runs.append(RunSource(label, Path("/nonexistent") / label, label, {}, metrics,
                              records))
    return runs


@pytest.mark.parametrize("weighted", [False, True])
def test_a_basis_projected_to_its_own_cases_is_the_comparisons_interval(weighted):
    # the projection starts from what the comparison computed: score intervals (pass/fail,
    # and a sparse share's scaled bound) rebuilt from the cases, at N = n, are the rows'
    from raglab.compare.comparison import CompareCfg, compare_runs

    rng = np.random.default_rng(5)
    n = 120
    weights = rng.choice([1.0, 4.0], size=n) if weighted else None
    b, c = _table_runs(rng, n, weights)
    comp = compare_runs(b, c, CompareCfg(n_bootstrap=200))
    seen = set()
    for metric in ("final.hit_rate@1", "faithfulness"):
        basis = comp.basis(metric, None)
        row, info = comp.row(metric), comp.info(metric)
        seen.add(info["ci_method"])
        assert basis is not None and basis.score is not None
        assert projected(basis, basis.n) == pytest.approx((row["ci_low"], row["ci_high"]),
                                                          abs=1e-9)
    assert seen == {"score", "score-bound"}


def test_the_note_names_checks_that_would_fail_and_the_requirement_reads_0(tmp_path):
    # 3 losses of 40 at margin 0.02: inconclusive, heading for a fail; the note says which
    from raglab.compare.decide import evaluate_gates
    from raglab.compare.gates import GateSet
    from raglab.compare.record import inconclusive_note

    row = {"metric": "final.hit_rate@5", "slice": None, "baseline": 1.0, "candidate": 0.925,
           "delta": -0.075, "ci_low": -0.2, "ci_high": 0.01, "p_value": 0.1,
           "p_adjusted": 0.1, "n": 40, "wins": 0, "ties": 37, "losses": 3, "comparable": True}
    gates = GateSet.model_validate({"gates": [
        {"metric": "final.hit_rate@5", "rule": "non_inferior", "margin": 0.02},
        {"metric": "final.hit_rate@5", "rule": "non_inferior", "margin": 0}]})
    results = evaluate_gates([row], gates)
    assert [r["settles_as"] for r in results] == ["fail", "fail"]
    assert results[1]["requirement"] == "CI low > 0"
    rec = {"decision": "INCONCLUSIVE", "results": results,
           "counts": {"inconclusive": 2}}
    note = inconclusive_note(rec)
    assert "2 of them would fail with more cases like these" in note
    assert "final.hit_rate@5 non_inferior [overall]" in note


def test_the_plugin_finds_a_relative_study_under_its_cwd(tmp_path):
    from raglab.pytest_plugin import _decide

    root = tmp_path / "project"
    root.mkdir()
    base, cand = _run(root, "base", 30), _run(root, "cand", 30)
    (root / "gates.yaml").write_text(GATES)
    d = _decide(tmp_path / "unused", base, cand, str(root / "gates.yaml"), study="study",
                cwd=root)
    assert d.decision == "INCONCLUSIVE" and d.exit_code == 4
    assert d.path.parent == root / "study"
