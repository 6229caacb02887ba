"""``raglab cases`` never destroys what it reads: an --out that is one of the command's
inputs is refused (it used to leave the run's own cases file empty), a symlinked cases file
is written through its link, and a run with a torn last record says so."""

from __future__ import annotations

import json
import os

from raglab.data.dataset import resolve_path
from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl

DEMO_CASES = resolve_path("pkg://raglab/datasets/demo/cases.jsonl")


def _tiny_run(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    run = tmp_path / "run"
    p = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                "dataset.labels=null", "tracking=none", "progress=off", "k=3",
                "candidate_depth=5", "metrics.cutoffs=[1,3,5]", f"cache_dir={tmp_path / 'c'}",
                f"hydra.run.dir={run}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    return run, corpus, cases


def test_from_run_refuses_to_write_over_its_inputs(tmp_path):
    run, corpus, cases = _tiny_run(tmp_path)
    link = tmp_path / "same-cases.jsonl"
    link.symlink_to(cases)
    for out in (cases, corpus, run / "records.jsonl", run / "config.yaml", link):
        before = {p: p.read_bytes() for p in (cases, corpus, run / "records.jsonl")}
        p = run_cli("cases", "from-run", str(run), "--out", str(out), cwd=tmp_path)
        assert p.returncode == 2, (out, p.stdout, p.stderr)
        assert "is an input of this command" in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
        assert {q: q.read_bytes() for q in before} == before
    p = run_cli("cases", "from-run", str(run), "--out", str(tmp_path / "drafts.jsonl"),
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "warning" not in p.stderr


def test_from_traffic_refuses_to_write_over_its_traffic(tmp_path):
    traffic = write_jsonl(tmp_path / "t.jsonl", [{"question": "q", "answer": "a"}])
    p = run_cli("cases", "from-traffic", str(traffic), "--out", str(traffic), cwd=tmp_path)
    assert p.returncode == 2 and "is an input of this command" in p.stderr
    assert json.loads(traffic.read_text()) == {"question": "q", "answer": "a"}


def test_a_torn_last_record_is_named(tmp_path):
    run, _, _ = _tiny_run(tmp_path)
    records = run / "records.jsonl"
    records.write_bytes(records.read_bytes() + b'{"case_id": "t-9", "tags": {')  # a kill
    p = run_cli("cases", "from-run", str(run), "--out", str(tmp_path / "d.jsonl"),
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "ends in a line cut short" in p.stderr and "left out" in p.stderr


def test_cases_add_writes_through_a_symlinked_cases_file(tmp_path):
    demo = DEMO_CASES.read_text(encoding="utf-8").splitlines()
    real = tmp_path / "data" / "cases.jsonl"
    real.parent.mkdir()
    real.write_text("\n".join(demo[:5]) + "\n", encoding="utf-8")
    link = tmp_path / "cases.jsonl"
    link.symlink_to(real)
    new = json.loads(demo[5])
    new["id"] = "added-1"
    batch = write_jsonl(tmp_path / "batch.jsonl", [new])
    p = run_cli("cases", "add", str(batch), f"dataset.cases={link}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    rows = [json.loads(x) for x in real.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows][-1] == "added-1" and len(rows) == 6
