"""What ``raglab decide`` refuses to read as a sequential decision, through the CLI: a
``sequential`` section of the wrong shape, a candidate with cases its baseline lacks, the
two runs swapped, clustered cases. Each is one line and exit 2, never a traceback nor a
decision on cases dropped without a word. And what a sequential run refuses before its
first case: a baseline graded differently on the gated families (exit 3)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from raglab.errors import UserError
from raglab.sequential.decide import summary_of
from tests.benchmarks.replay_data import make
from tests.conftest import run_cli

N = 40
GATES = "gates:\n  - {metric: final.hit_rate@5, rule: non_inferior, margin: 0.05}\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("seqrefuse")
    paths = make(root / "data", N, depth=10, n_slices=5, n_docs=60)
    (root / "gates.yaml").write_text(GATES)
    paths.update(root=root, gates=root / "gates.yaml")
    paths["base"] = _run(paths, "base")
    paths["cand"] = _run(paths, "cand", f"sequential.against={paths['base']}",
                         f"sequential.gates={paths['gates']}")
    return paths


def _run(p: dict[str, Path], name: str, *extra: str, cases: Path | None = None) -> Path:
    run_dir, proc = _started(p, name, *extra, cases=cases)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return run_dir


def _started(p: dict[str, Path], name: str, *extra: str, cases: Path | None = None):
    """``(run directory, the finished process)`` of a replay run of the set (``cases``:
    another cases file)."""
    run_dir = p["root"] / name
    proc = run_cli("run", "system=replay", f"system.path={p['outputs']}",
                   f"dataset.corpus={p['corpus']}", f"dataset.cases={cases or p['cases']}",
                   "dataset.labels=null", "grader=none", "tracking=none",
                   f"hydra.run.dir={run_dir}", f"cache_dir={p['root'] / 'cache'}",
                   "progress=off", *extra, cwd=p["root"])
    return run_dir, proc


def _decide(p: dict[str, Path], base: Path, cand: Path, *extra: str) -> str:
    """decide's one line of error (asserting exit 2, no traceback, no record)."""
    study = p["root"] / f"study-{cand.name}-{len(list(p['root'].glob('study-*')))}"
    proc = run_cli("decide", str(base), str(cand), f"gates={p['gates']}", "--study",
                   str(study), *extra, cwd=p["root"])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not list(study.glob("decision-*"))
    return err[0]


def _edited(p: dict[str, Path], name: str, edit) -> Path:
    run = p["root"] / name
    shutil.copytree(p["cand"], run)
    metrics = json.loads((run / "metrics.json").read_text())
    edit(metrics)
    (run / "metrics.json").write_text(json.dumps(metrics))
    return run


def test_a_sequential_section_of_the_wrong_shape_is_one_line(runs):
    # before: AttributeError ('str' object has no attribute 'get'), a traceback, exit 1
    run = _edited(runs, "edited", lambda m: m.update(sequential="yes"))
    err = _decide(runs, runs["base"], run)
    assert str(run / "metrics.json") in err and "'sequential' must be a mapping" in err


@pytest.mark.parametrize("edit, field", [
    (lambda s: s.update(checks=[1, 2]), "checks"),
    (lambda s: s["checks"][0].update(bet_target="abc"), "checks[0].bet_target"),
    (lambda s: s["checks"][0].update(bet_target=0), "checks[0].bet_target"),
    (lambda s: s["checks"][0].update(bet_target=float("nan")), "checks[0].bet_target"),
    (lambda s: s["checks"][0].update(slice="overall"), "checks[0].slice"),
    (lambda s: s["checks"][0].update(index=[0]), "checks[0].index"),
    (lambda s: s["checks"][0].update(on="both"), "checks[0].on"),
    (lambda s: s["checks"][0].update(metric=3), "checks[0].metric"),
    (lambda s: s.update(stopped_because=7), "stopped_because"),
    (lambda s: s.update(cases_run="many"), "cases_run"),
    (lambda s: s.update(cases_run=s["cases_total"] + 1), "cases_run"),
    (lambda s: s.update(cases_total=True), "cases_total"),
])
def test_each_field_decide_reads_is_checked(edit, field):
    # before: tracebacks (AttributeError, TypeError, ValueError) or the words of a bad
    # field in the record ("settled after many of 300 cases")
    summary = {"cases_run": 100, "cases_total": 300, "stopped_because": "every check settled",
               "gates": "g", "seed": 0, "checks": [
                   {"gate": "g", "index": 0, "metric": "faithfulness", "on": "delta",
                    "slice": None, "bet_target": 150.0}]}
    run = SimpleNamespace(run_dir=Path("cand"), metrics={"sequential": summary})
    assert summary_of(run) is summary
    edit(summary)
    with pytest.raises(UserError, match=f"metrics.json: 'sequential.*{re.escape(field)}"):
        summary_of(run)


def test_cases_the_baseline_lacks_are_refused_not_dropped(runs):
    # before: exit 0 or 4, the candidate's cases without a baseline record left out of
    # every check with no word of it
    base = runs["root"] / "thin"
    shutil.copytree(runs["base"], base)
    lines = (base / "records.jsonl").read_text(encoding="utf-8").splitlines()
    (base / "records.jsonl").write_text("\n".join(lines[::2]) + "\n", encoding="utf-8")
    metrics = json.loads((base / "metrics.json").read_text())
    metrics["n_cases"] = len(lines[::2])
    (base / "metrics.json").write_text(json.dumps(metrics))
    err = _decide(runs, base, runs["cand"])
    assert "the baseline run thin has no record of case" in err
    assert "of the sequential candidate's 40 cases missing" in err
    assert f"decide on that baseline (its sequential.against: {runs['base']})" in err
    assert "--allow-case-mismatch" in err


def test_a_sequential_run_given_as_the_baseline_says_the_runs_are_swapped(runs):
    # before: "the case sets differ ...; pass --allow-case-mismatch to compare the N
    # shared cases", which leads to a fixed-n decision with the runs the wrong way round
    cand = _edited(runs, "fewer", lambda m: None)
    lines = (cand / "records.jsonl").read_text(encoding="utf-8").splitlines()[:30]
    (cand / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    metrics = json.loads((cand / "metrics.json").read_text())
    metrics["n_cases"] = metrics["sequential"]["cases_run"] = 30
    metrics["sequential"]["stopped_because"] = "every check settled"
    (cand / "metrics.json").write_text(json.dumps(metrics))
    err = _decide(runs, cand, runs["base"])
    assert "the baseline run fewer is a sequential run (30 of 40 cases run)" in err
    assert "swapped?" in err


def test_clustered_cases_are_refused_on_a_sequential_run(runs):
    # before: exit 0, a record "clustered by tag ..." whose checks read sequences that
    # take the cases as independent draws
    key = next(iter(json.loads((runs["cand"] / "records.jsonl").open().readline())["tags"]))
    err = _decide(runs, runs["base"], runs["cand"], "--set", f"cluster={key}")
    assert f"compare.cluster={key}" in err and "independent draws" in err


def test_a_run_graded_unlike_its_baseline_is_refused_before_any_case(runs):
    # before: exit 0, the run stopped on differences of scores graded differently, and
    # decide then refused the pair (metric versions differ, exit 3)
    run_dir = runs["root"] / "regraded"
    proc = run_cli("run", "system=replay", f"system.path={runs['outputs']}",
                   f"dataset.corpus={runs['corpus']}", f"dataset.cases={runs['cases']}",
                   "dataset.labels=null", "grader=none", "tracking=none",
                   f"hydra.run.dir={run_dir}", "progress=off",
                   "metrics.straddle_min_fraction=0.3", f"sequential.against={runs['base']}",
                   f"sequential.gates={runs['gates']}", cwd=runs["root"])
    assert proc.returncode == 3, proc.stdout + proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "metric versions differ for the gated families (retrieval: baseline" in err[0]
    assert not (run_dir / "records.jsonl").exists()


@pytest.mark.slow  # (two more runs, a few seconds)
def test_a_sweep_of_sequential_runs_says_its_jobs_ran_different_cases(runs):
    # before: the job table set the means of different cases side by side without a word
    sweep, gates = runs["root"] / "sweep", runs["root"] / "loose.yaml"
    # a bound any mean meets: settled after the first batch of 5, on each seed's own cases
    gates.write_text("gates:\n  - {metric: final.hit_rate@5, rule: bound, max: 1.0}\n")
    proc = run_cli("run", "-m", "system=replay", f"system.path={runs['outputs']}",
                   f"dataset.corpus={runs['corpus']}", f"dataset.cases={runs['cases']}",
                   "dataset.labels=null", "grader=none", "tracking=none",
                   f"hydra.sweep.dir={sweep}", f"cache_dir={runs['root'] / 'cache'}",
                   "progress=off", f"sequential.against={runs['base']}",
                   f"sequential.gates={gates}", "sequential.batch=5",
                   "sequential.seed=1,2", cwd=runs["root"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = [json.loads((sweep / str(i) / "metrics.json").read_text())["sequential"]
           for i in (0, 1)]
    assert [s["cases_run"] for s in ran] == [5, 5]
    assert "sequential runs (job 0 5 of 40, job 1 5 of 40 cases)" in proc.stdout
    assert "the table compares different cases" in proc.stdout


def test_an_empty_against_is_refused_not_read_as_the_working_directory(runs):
    # `sequential.against=$BASELINE` with the variable unset; before: the working directory
    # (here a run directory) was read as the baseline, exit 0, `against: ''` in metrics.json
    run_dir = runs["root"] / "empty"
    proc = run_cli("run", "system=replay", f"system.path={runs['outputs']}",
                   f"dataset.corpus={runs['corpus']}", f"dataset.cases={runs['cases']}",
                   "dataset.labels=null", "grader=none", "tracking=none",
                   f"hydra.run.dir={run_dir}", "progress=off", "sequential.against=",
                   f"sequential.gates={runs['gates']}", cwd=runs["base"])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "sequential.against" in err[0] and "at least 1 character" in err[0]
    assert not (run_dir / "records.jsonl").exists()


def _against(p: dict[str, Path], baseline: Path) -> str:
    """A sequential run's one line of error against ``baseline`` (exit 2)."""
    _, proc = _started(p, f"against-{baseline.name}", f"sequential.against={baseline}",
                       f"sequential.gates={p['gates']}")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return err[0]


@pytest.mark.slow  # (two more runs, a few seconds)
def test_a_baseline_missing_cases_is_refused_naming_the_likely_cause(runs):
    # before: only "the baseline run has no record of case X (N case(s) missing)"
    killed = runs["root"] / "killed"
    shutil.copytree(runs["base"], killed)
    (killed / "metrics.json").unlink()
    lines = (killed / "records.jsonl").read_text(encoding="utf-8").splitlines()[:25]
    (killed / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    err = _against(runs, killed)
    assert "(15 case(s) missing): the baseline run did not finish (metrics.json is " \
        "missing); run its command again" in err
    seq = _edited(runs, "short", lambda m: None)
    lines = (seq / "records.jsonl").read_text(encoding="utf-8").splitlines()[:20]
    (seq / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    metrics = json.loads((seq / "metrics.json").read_text())
    metrics["n_cases"] = metrics["sequential"]["cases_run"] = 20
    (seq / "metrics.json").write_text(json.dumps(metrics))
    err = _against(runs, seq)
    assert "the baseline is itself a sequential run (20 of 40 cases run); give the run of " \
        f"every case it ran against (its sequential.against: {runs['base']})" in err


def test_an_unfinished_sequential_candidate_is_resumed_not_allowed_incomplete(runs):
    # before: "did not finish (metrics.json is missing); pass --allow-incomplete to compare
    # it anyway", which leads on to a fixed-n reading of the cases it has
    cand = _edited(runs, "stopped", lambda m: None)
    (cand / "metrics.json").unlink()
    err = _decide(runs, runs["base"], cand)
    assert "is a sequential run that did not finish (metrics.json is missing): run its " \
        "command again to resume it" in err and "--allow-incomplete" not in err


def test_a_baseline_value_out_of_range_is_refused_before_any_case(runs):
    # before: refused when the run reached the case, after paying for the batches before it
    odd = runs["root"] / "odd"
    shutil.copytree(runs["base"], odd)
    rows = [json.loads(x) for x in (odd / "records.jsonl").open(encoding="utf-8")]
    rows[-1]["metrics"]["final.hit_rate@5"] = 1.5
    (odd / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows),
                                       encoding="utf-8")
    err = _against(runs, odd)
    assert f"case {rows[-1]['case_id']}: sequential decisions need metrics in [0, 1]; the " \
        "baseline's final.hit_rate@5 is 1.5" in err
    assert not (runs["root"] / "against-odd" / "records.jsonl").exists()


@pytest.mark.slow  # (a message's wording; the default run's time is spent)
def test_a_sweep_directory_as_the_baseline_names_one_of_its_jobs(runs):
    # before: "... (a sweep directory: compare it with SWEEP --baseline JOB)", advice of
    # raglab compare given to a run (and to decide)
    sweep = runs["root"] / "a-sweep"
    shutil.copytree(runs["base"], sweep / "0")
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    err = _against(runs, sweep)
    assert f"a sweep directory: give one of its jobs, such as {sweep / '0'}" in err


def test_a_run_of_an_edited_cases_file_warns_that_its_baseline_read_another(runs):
    """The same case ids with an edited question: the run warned of nothing (decide only);
    it says its baseline read other cases, on the terminal and in metrics.json."""
    edited = runs["root"] / "edited-cases.jsonl"
    lines = runs["cases"].read_text().splitlines()
    first = json.loads(lines[0])
    first["question"] += " (edited)"
    edited.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    run_dir, proc = _started(runs, "edited-set", f"sequential.against={runs['base']}",
                             f"sequential.gates={runs['gates']}", cases=edited)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = json.loads((run_dir / "metrics.json").read_text())["warnings"]
    (w,) = [w for w in said if w.startswith("sequential.against: the runs used different")]
    assert w.startswith("sequential.against: the runs used different cases files (")
    assert w.endswith("an edited case is not the one the baseline ran")
    assert f"raglab: warning: {w}" in proc.stderr
