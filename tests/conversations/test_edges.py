"""Edges of conversations found in review: each test names the behaviour it pins."""

from __future__ import annotations

import json
from pathlib import Path


def _job(root: Path, num: int, values: dict[str, float], k: int) -> dict:
    d = root / str(num)
    d.mkdir()
    (d / "records.jsonl").write_text("".join(
        json.dumps({"case_id": cid, "tags": {"conversation": cid.split(".")[0]},
                    "metrics": {"final.evidence_recall": v}}) + "\n"
        for cid, v in values.items()))
    return {"num": num, "dir": d, "values": {"k": str(k)},
            "overall": {"final.evidence_recall": sum(values.values()) / len(values)}}


def test_the_sweeps_best_line_tests_a_conversations_turns_together(tmp_path):
    """3 of 20 conversations gain on all of their 3 turns: 9 turns better, none worse is
    'significant' turn by turn (p 0.004), not with 3 changed conversations of 20."""
    from raglab.runner.sweep import versus_runner_up

    ids = [f"c{i:02d}.t{t}" for i in range(20) for t in (1, 2, 3)]
    base = dict.fromkeys(ids, 0.0)
    best = {cid: 1.0 if cid < "c03" else 0.0 for cid in ids}
    jobs = [_job(tmp_path, 0, base, 3), _job(tmp_path, 1, best, 5)]
    line = versus_runner_up(jobs, ["k"], {"k": "k"})
    assert line.startswith("; not significantly better than the runner-up, job 0 (k=3), 0 ")
    assert "n=60, clustered by conversation (20 conversations))" in line


def test_a_turn_that_is_not_an_object_is_one_plain_line(tmp_path):
    """A turn written as a string (or a number, null) is named as the turn, in JSON
    words: not the internal model's name nor the field path again."""
    from raglab.data.conversation import flatten
    from raglab.errors import UserError
    from tests.conftest import run_cli, write_jsonl
    from tests.conversations.conftest import CORPUS

    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    turn = {"question": "When do exports run?", "reference_answer": "Nightly."}
    cases = write_jsonl(tmp_path / "cases.jsonl", [{"id": "c1", "turns": [turn, "and then?"]}])
    p = run_cli("validate", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                "dataset.labels=null", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines()[-1].endswith(
        "cases.jsonl:1 case c1.t2: a turn must be a JSON object, not a string"), p.stderr
    assert "Traceback" not in p.stderr and "TurnIn" not in p.stderr
    for bad, words in ((3, "a number"), (None, "null"), ([], "a list")):
        try:
            flatten({"id": "c1", "turns": [turn, bad]}, file="cases.jsonl", line=1)
        except UserError as e:
            assert (e.case_id, e.message) == ("c1.t2", f"a turn must be a JSON object, not "
                                                       f"{words}")
        else:
            raise AssertionError(f"{bad!r} was taken as a turn")


def test_validate_writes_the_quarantine_when_every_turn_is_quarantined(tmp_path):
    """Every turn's evidence names a missing document: validate lists them in
    quarantine.jsonl and exits 1 (it said 'every case has weight 0', exit 2, and wrote
    nothing)."""
    from tests.conftest import run_cli, write_jsonl
    from tests.conversations.conftest import CORPUS

    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    gone = {"doc_id": "kb/gone", "quote": "no longer here"}
    cases = write_jsonl(tmp_path / "cases.jsonl", [{"id": "c1", "turns": [
        {"question": "When do exports run?", "reference_answer": "Nightly.", "evidence": [gone]},
        {"question": "And then?", "follow_up": True, "evidence": [gone]}]}])
    p = run_cli("validate", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                "dataset.labels=null", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "(2 cases, 0 usable, 2 quarantined)" in p.stdout
    rows = [json.loads(x) for x in (tmp_path / "quarantine.jsonl").read_text().splitlines()]
    assert [(r["case_id"], r["line"], r["kind"]) for r in rows] == [
        ("c1.t1", 1, "missing_document"), ("c1.t2", 1, "missing_document")]


def test_validate_counts_conversations_in_one_row_and_turns_in_order(tmp_path):
    """validate's table had a row per conversation (the unit, not a slice: 1,000 rows for
    1,000 conversations) and the turns in text order (1, 10, 11, 2, ...)."""
    from tests.conftest import run_cli, write_jsonl
    from tests.conversations.conftest import CORPUS

    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    turn = {"question": "When do exports run?", "reference_answer": "Nightly.",
            "evidence": [{"doc_id": "kb/exports", "quote": "Exports run nightly at 02:00 UTC"}],
            "nuggets": [{"text": "nightly", "vital": True}]}
    cases = write_jsonl(tmp_path / "cases.jsonl", [{"id": "long", "turns": [turn] * 11},
                                                   {"id": "short", "turns": [turn] * 2}])
    p = run_cli("validate", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                "dataset.labels=null", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = [line.split() for line in p.stdout.splitlines() if line.startswith("tag:")]
    assert rows[0] == ["tag:conversation", "/", "2", "conversations", "13"]
    turns = [r[2] for r in rows if r[0] == "tag:turn"]
    assert turns == [str(k) for k in range(1, 12)]
