"""The demo's conversations through the reference pipeline: the history it keeps decides
its follow-ups, not its first turns."""

from __future__ import annotations

import json
import statistics

import pytest

from tests.conftest import run_cli


def _recall_by_kind(run_dir):
    by: dict[str, list[float]] = {}
    for line in (run_dir / "records.jsonl").read_text().splitlines():
        r = json.loads(line)
        v = r["metrics"].get("final.evidence_recall")
        if v is not None:
            by.setdefault(r["tags"]["turn_kind"], []).append(v)
    return {k: statistics.mean(v) for k, v in by.items()}


@pytest.mark.slow
def test_the_demo_follow_ups_need_the_history(tmp_path):
    got = {}
    for mode in ("none", "last"):
        r = run_cli("run", "dataset=demo_chat", f"system.history={mode}", "tracking=none",
                    f"hydra.run.dir={tmp_path / mode}", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        got[mode] = _recall_by_kind(tmp_path / mode)
    assert got["none"]["first"] == got["last"]["first"]
    assert got["last"]["follow_up"] > got["none"]["follow_up"] + 0.08
    # the demo's follow-ups do not name what they ask about
    assert got["none"]["follow_up"] < got["none"]["first"] - 0.1
