"""``raglab cases``: failures of a small demo run round-trip through from-run and add;
traffic drafts; every refusal leaves the set untouched (real subprocesses)."""

from __future__ import annotations

import json

import pytest

from raglab.data.dataset import resolve_path
from tests.conftest import run_cli
from tests.monitor.traffic import traffic_lines, write_traffic

DEMO_CASES = resolve_path("pkg://raglab/datasets/demo/cases.jsonl")


def _rows(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
def test_failures_round_trip_into_another_set(tmp_path):
    demo = _rows(DEMO_CASES)
    subset = _write(tmp_path / "subset.jsonl", demo[:20])
    target = _write(tmp_path / "target.jsonl", demo[20:60])
    p = run_cli("run", f"dataset.cases={subset}", "dataset.labels=null", "tracking=none",
                "progress=off", f"cache_dir={tmp_path / 'cache'}",
                f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    # the run directory read as traffic by the monitor: every record with an answer is a line
    recs = _rows(tmp_path / "run" / "records.jsonl")
    p = run_cli("monitor", str(tmp_path / "run"), "monitor.sample_rate=1", "tracking=none",
                f"cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path / 'mon'}",
                cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    mon = json.loads((tmp_path / "mon" / "monitor.json").read_text())
    answered = [r for r in recs if (r.get("output") or {}).get("answer") is not None]
    assert mon["lines"] == len(answered) and mon["lines"] + mon["bad_lines"] == 20
    assert mon["windows"][0]["judged"] == len(answered)
    assert mon["work"]["grader_calls"] > 0  # context precision: per-passage judgments

    p = run_cli("cases", "from-run", str(tmp_path / "run"), "--out", str(tmp_path / "d.jsonl"),
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    drafts = _rows(tmp_path / "d.jsonl")
    assert drafts and f"{len(drafts)} failing case(s) of 20" in p.stdout
    # one definition of a failed case: the run's "failed cases: N" are the cases drafted
    failed = json.loads((tmp_path / "run" / "metrics.json").read_text())["diagnoses"]["failed"]
    assert len(drafts) == failed
    assert {d["id"] for d in drafts} == {r["case_id"] for r in recs if r["diagnosis"]}
    assert all(d["draft"]["diagnosis"] for d in drafts)
    by_id = {c["id"]: c for c in demo[:20]}
    for d in drafts:
        assert d["draft"]["reasons"] and "answer" in d["draft"] and "context" in d["draft"]
        assert {k: v for k, v in d.items() if k != "draft"} == by_id[d["id"]]  # labels kept

    before = target.read_bytes()
    add = ["cases", "add", str(tmp_path / "d.jsonl"), f"dataset.cases={target}"]
    p = run_cli(*add, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    after = _rows(target)
    assert len(after) == 40 + len(drafts) and target.read_bytes().startswith(before)
    assert after[40:] == [{k: v for k, v in d.items() if k != "draft"} for d in drafts]

    # the same drafts again: duplicates by id, nothing written
    grown = target.read_bytes()
    p = run_cli(*add, cwd=tmp_path)
    assert p.returncode == 2 and "duplicate id" in p.stderr and "nothing added" in p.stderr
    assert target.read_bytes() == grown

    # one bad case among good ones: none of them is added
    good = dict(demo[60], id="new-1")
    same_q = dict(demo[20], id="new-2")  # same question and filters as a case in the set
    bad_q = json.loads(json.dumps(demo[61]))
    bad_q["id"] = "new-3"
    bad_q["evidence"][0]["quote"] = "a quote that is in no document of the corpus"
    no_ev = dict(demo[62], id="new-4", evidence=[])
    draft = dict(demo[63], id="new-5", needs_labels=True)
    batch = _write(tmp_path / "batch.jsonl", [good, same_q, bad_q, no_ev, draft])
    p = run_cli("cases", "add", str(batch), f"dataset.cases={target}", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    err = p.stderr
    assert f"{batch}:2 case new-2: duplicate of case {demo[20]['id']}" in err
    assert f"{batch}:3 case new-3: evidence 0: quote not found" in err
    assert f"{batch}:4 case new-4: answerable case without evidence" in err
    assert f"{batch}:5 case new-5: a draft still marked needs_labels" in err
    assert "Traceback" not in err and target.read_bytes() == grown

    # the shipped set is never written
    p = run_cli("cases", "add", str(batch), cwd=tmp_path)
    assert p.returncode == 2 and "read-only" in p.stderr


def test_traffic_drafts_need_labels(tmp_path):
    rows = traffic_lines(40, 5)
    traffic = write_traffic(tmp_path / "traffic.jsonl", rows)
    out = tmp_path / "drafts.jsonl"
    p = run_cli("cases", "from-traffic", str(traffic), "--out", str(out), "--feedback", "down",
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    drafts = _rows(out)
    down = [r for r in rows if r["feedback"] == "down"]
    assert f"from {len(down)} picked line(s)" in p.stdout
    assert len(drafts) == len({r["question"] for r in down})  # one per question and filters
    assert all(d["needs_labels"] is True and d["evidence"] == [] for d in drafts)
    assert {d["question"] for d in drafts} == {r["question"] for r in down}
    assert all(d["draft"]["feedback"] == "down" and d["draft"]["answer"] for d in drafts)

    alerts = _write(tmp_path / "alerts.json", [])
    alerts.write_text(json.dumps([{"kind": "x", "window_start": "2026-11-03T00:00:00+00:00",
                                   "window_end": "2026-11-04T00:00:00+00:00"}]))
    p = run_cli("cases", "from-traffic", str(traffic), "--out", str(out), "--alerts",
                str(alerts), cwd=tmp_path)
    assert p.returncode == 0 and "from 20 picked line(s)" in p.stdout

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(resolve_path("pkg://raglab/datasets/demo/corpus.jsonl").read_text())
    target = _write(tmp_path / "target.jsonl", _rows(DEMO_CASES)[:5])
    before = target.read_bytes()
    p = run_cli("cases", "add", str(out), f"dataset.cases={target}",
                f"dataset.corpus={corpus}", cwd=tmp_path)
    assert p.returncode == 2 and "needs_labels" in p.stderr
    assert target.read_bytes() == before


def test_cases_add_help_is_the_help(tmp_path):
    """``raglab cases add --help`` was the usage error (exit 2)."""
    p = run_cli("cases", "add", "--help", cwd=tmp_path)
    assert p.returncode == 0 and not p.stderr, p.stderr
    assert p.stdout.startswith("usage: raglab cases from-run") and "\nadd " in p.stdout
