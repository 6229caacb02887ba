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
