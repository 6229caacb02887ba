"""A sequential run through the CLI on replayed pairs: it takes its cases in a seeded
order, in batches, stops once every check is settled (records only for the cases
run; metrics.json says so), and ``raglab decide`` reads the confidence sequence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.replay_data import make
from tests.conftest import run_cli

N = 300
GATES = "gates:\n  - {metric: final.hit_rate@5, rule: non_inferior, margin: 0.05}\n"


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("seq")
    paths = make(root / "data", N, depth=10, n_slices=5, n_docs=100)
    # the baseline retrieves a gold quote first for every case; the candidate loses it in
    # 30% of the cases (their retrieved lists emptied)
    docs = {r["doc_id"]: r["text"] for r in map(json.loads, paths["corpus"].open())}
    cases = {r["id"]: r for r in map(json.loads, paths["cases"].open())}
    gold, lost = root / "data" / "gold.jsonl", root / "data" / "lost.jsonl"
    with open(paths["outputs"], encoding="utf-8") as src, open(gold, "w") as g, \
            open(lost, "w") as dst:
        for i, line in enumerate(src):
            row = json.loads(line)
            ev = cases[row["case_id"]]["evidence"][0]
            start = docs[ev["doc_id"]].index(ev["quote"])
            hit = {"doc_id": ev["doc_id"], "text": ev["quote"], "score": 99.0,
                   "start": start, "end": start + len(ev["quote"])}
            row["candidates"] = [hit] + row["candidates"]
            row["context"] = [hit] + row["context"]
            g.write(json.dumps(row) + "\n")
            if i % 10 < 3:
                row["candidates"], row["context"] = [], []
            dst.write(json.dumps(row) + "\n")
    paths["outputs"] = gold
    (root / "gates.yaml").write_text(GATES)
    paths.update(root=root, lost=lost, gates=root / "gates.yaml")
    paths["base"] = _run(paths, "base", paths["outputs"])
    return paths


def _run(p: dict[str, Path], name: str, outputs: Path, *extra: str) -> Path:
    run_dir = p["root"] / name
    proc = run_cli("run", "system=replay", f"system.path={outputs}",
                   f"dataset.corpus={p['corpus']}", f"dataset.cases={p['cases']}",
                   "dataset.labels=null", "grader=none", "tracking=none",
                   f"hydra.run.dir={run_dir}", f"cache_dir={p['root'] / 'cache'}",
                   "progress=off", *extra, cwd=p["root"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return run_dir


def _lines(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "records.jsonl").open(encoding="utf-8")]


def test_a_finished_run_that_is_not_sequential_runs_again_as_before(pairs):
    first = (pairs["base"] / "records.jsonl").read_bytes()
    _run(pairs, "base", pairs["outputs"])   # nothing left to do: no batch of no cases
    assert (pairs["base"] / "records.jsonl").read_bytes() == first
    assert "sequential" not in json.loads((pairs["base"] / "metrics.json").read_text())


def test_identical_outputs_stop_at_the_first_batch_that_settles(pairs):
    cand = _run(pairs, "same", pairs["outputs"], f"sequential.against={pairs['base']}",
                f"sequential.gates={pairs['gates']}")
    seq = json.loads((cand / "metrics.json").read_text())["sequential"]
    # the capital against -0.05 reaches 2 / alpha after 96 paired cases (test_cs.py):
    # five batches of 20
    assert {k: seq[k] for k in ("cases_run", "cases_total", "seed", "stopped_because")} == {
        "cases_run": 100, "cases_total": N, "seed": 0,
        "stopped_because": "every check settled"}
    (check,) = seq["checks"]
    assert (check["status"], check["settled_at"]) == ("pass", 96)
    records = _lines(cand)
    assert len(records) == 100 and len({r["case_id"] for r in records}) == 100
    # in the seeded order, not the file's
    ids = [r["case_id"] for r in records]
    assert ids != sorted(ids)
    proc = run_cli("decide", str(pairs["base"]), str(cand), f"gates={pairs['gates']}",
                   "--study", str(pairs["root"] / "study"), cwd=pairs["root"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "settled after 100 of 300 cases" in proc.stdout
    (rec_file,) = (pairs["root"] / "study").glob("decision-*.json")
    rec = json.loads(rec_file.read_text())
    (result,) = rec["results"]
    assert result["status"] == "pass" and "confidence sequence" in result["reason"]
    assert any("settled after 100 of 300 cases" in w for w in rec["warnings"])
    assert rec["sequential"]["settled"] == "settled after 100 of 300 cases"
    assert rec["sequential"]["cases_run"] == 100 and rec["sequential"]["seed"] == 0


@pytest.mark.slow
def test_a_clear_loss_stops_early_as_no_go_and_the_seed_is_kept(pairs):
    cand = _run(pairs, "lost", pairs["lost"], f"sequential.against={pairs['base']}",
                f"sequential.gates={pairs['gates']}", "sequential.seed=7",
                "sequential.batch=25")
    seq = json.loads((cand / "metrics.json").read_text())["sequential"]
    assert seq["stopped_because"] == "every check settled" and seq["seed"] == 7
    assert seq["cases_run"] % 25 == 0 and seq["cases_run"] <= N // 2
    assert seq["checks"][0]["status"] == "fail"
    proc = run_cli("decide", str(pairs["base"]), str(cand), f"gates={pairs['gates']}",
                   "--study", str(pairs["root"] / "study2"), cwd=pairs["root"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"settled after {seq['cases_run']} of 300 cases" in proc.stdout


def test_a_bound_on_the_mean_settles_on_its_own_sequence(pairs):
    # every candidate case hits: the one-sample sequence of the mean clears min 0.5
    gates = pairs["root"] / "bound.yaml"
    gates.write_text("gates:\n  - {metric: final.hit_rate@5, rule: bound, min: 0.5}\n")
    cand = _run(pairs, "bound", pairs["outputs"], f"sequential.against={pairs['base']}",
                f"sequential.gates={gates}")
    seq = json.loads((cand / "metrics.json").read_text())["sequential"]
    assert seq["stopped_because"] == "every check settled" and seq["cases_run"] < N
    (check,) = seq["checks"]
    assert (check["on"], check["status"]) == ("mean", "pass")
    assert check["cs_low"] > 0.5 and check["bet_target"] == N / 2


def test_a_gate_that_cannot_be_sequential_is_one_line(pairs):
    bad = pairs["root"] / "latency.yaml"
    bad.write_text("gates:\n  - {metric: final.hit_rate@5, rule: non_inferior, margin: 0.05}\n"
                   "  - {metric: latency_ms.total, rule: bound, max_increase: 100, "
                   "by: interval}\n")
    proc = run_cli("run", "system=replay", f"system.path={pairs['outputs']}",
                   f"dataset.corpus={pairs['corpus']}", f"dataset.cases={pairs['cases']}",
                   "dataset.labels=null", "grader=none", "tracking=none",
                   f"hydra.run.dir={pairs['root'] / 'bad'}", "progress=off",
                   f"sequential.against={pairs['base']}", f"sequential.gates={bad}",
                   cwd=pairs["root"])
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "gate 2 (latency_ms.total bound)" in err[0] and "not in [0, 1]" in err[0]


@pytest.mark.slow
def test_a_settled_run_run_again_does_no_more_work(pairs):
    args = (f"sequential.against={pairs['base']}", f"sequential.gates={pairs['gates']}")
    cand = _run(pairs, "again", pairs["outputs"], *args)
    first = (cand / "records.jsonl").read_bytes()
    _run(pairs, "again", pairs["outputs"], *args)
    assert (cand / "records.jsonl").read_bytes() == first
    seq = json.loads((cand / "metrics.json").read_text())["sequential"]
    assert (seq["cases_run"], seq["stopped_because"]) == (100, "every check settled")


@pytest.mark.slow
def test_a_resumed_run_settles_on_the_sequence_decide_reads(pairs):
    # a run interrupted after 20 cases, two of whose records had failed: the resume runs
    # those two again (after the 18 kept) and goes on in the seeded order; the run's
    # sequences and decide's are one and the same
    import shutil

    args = (f"sequential.against={pairs['base']}", f"sequential.gates={pairs['gates']}",
            "sequential.seed=7", "sequential.batch=25")
    whole = _run(pairs, "whole", pairs["lost"], *args)
    part = pairs["root"] / "part"
    shutil.copytree(whole, part)
    lines = (part / "records.jsonl").read_text(encoding="utf-8").splitlines()[:20]
    for i in (2, 7):
        rec = json.loads(lines[i])
        rec["error"] = "system: timed out"
        lines[i] = json.dumps(rec)
    (part / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (part / "metrics.json").unlink()
    _run(pairs, "part", pairs["lost"], *args)
    ids = [r["case_id"] for r in _lines(part)]
    first = [json.loads(x)["case_id"] for x in lines]
    assert ids[:18] == first[:2] + first[3:7] + first[8:]
    assert ids[18:20] == [first[2], first[7]]
    (check,) = json.loads((part / "metrics.json").read_text())["sequential"]["checks"]
    proc = run_cli("decide", str(pairs["base"]), str(part), f"gates={pairs['gates']}",
                   "--study", str(pairs["root"] / "study3"), cwd=pairs["root"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (rec_file,) = (pairs["root"] / "study3").glob("decision-*.json")
    (result,) = json.loads(rec_file.read_text())["results"]
    assert result["status"] == check["status"] == "fail"
    assert (result["ci_low"], result["ci_high"]) == (check["cs_low"], check["cs_high"])
    assert f"fail settled after {check['settled_at']} of {check['n']} paired" \
        in result["reason"]


def test_a_gate_set_of_budgets_alone_is_one_line_and_writes_no_record(pairs):
    budgets = pairs["root"] / "budgets.yaml"
    budgets.write_text("gates:\n  - {metric: latency_ms.total, rule: bound, max: 2000}\n"
                       "  - {metric: cost_usd_per_query, rule: bound, max: 0.01}\n")
    proc = run_cli("run", "system=replay", f"system.path={pairs['outputs']}",
                   f"dataset.corpus={pairs['corpus']}", f"dataset.cases={pairs['cases']}",
                   "dataset.labels=null", "grader=none", "tracking=none",
                   f"hydra.run.dir={pairs['root'] / 'budgets'}", "progress=off",
                   f"sequential.against={pairs['base']}", f"sequential.gates={budgets}",
                   cwd=pairs["root"])
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "budgets are read on the cases run" in err[0]
    assert not (pairs["root"] / "budgets" / "records.jsonl").exists()
    assert not (pairs["root"] / "budgets" / "metrics.json").exists()
