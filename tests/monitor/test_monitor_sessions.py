"""Production traffic of conversations: lines and traces with a session id keep their
session and turn, the monitor reports its figures per turn and says how many sessions it
saw."""

from __future__ import annotations

import json

from raglab.monitor.traffic import read_traffic
from tests.conftest import run_cli, write_jsonl
from tests.traces.otlp_build import rag_trace, write_lines

FACT = "Refunds are paid back to the original card within 5 business days."


def test_traffic_lines_of_a_session_are_numbered_by_time(tmp_path):
    line = {"question": "How long do refunds take?", "answer": FACT,
            "context": [{"doc_id": "kb/a", "text": FACT, "score": 1.0}]}
    f = write_jsonl(tmp_path / "traffic.jsonl", [
        {**line, "id": "r1", "session": "s-a", "timestamp": "2026-11-02T10:05:00Z"},
        {**line, "id": "r2", "session": "s-a", "timestamp": "2026-11-02T10:00:00Z"},
        {**line, "id": "r3", "session": 42, "timestamp": "2026-11-02T10:00:00Z"},
        {**line, "id": "r4", "session": "s-b", "turn": 4, "timestamp": "2026-11-02T09:00:00Z"},
        {**line, "id": "r5", "session": "", "timestamp": "2026-11-02T10:00:00Z"},
        {**line, "id": "r6", "timestamp": "2026-11-02T10:00:00Z"}])
    t = read_traffic(f)
    got = {ln.id: (ln.session, ln.turn) for _, ln in t.lines}
    assert got == {"r1": ("s-a", 2), "r2": ("s-a", 1), "r3": ("42", 1), "r4": ("s-b", 4),
                   "r5": (None, None), "r6": (None, None)}
    assert t.sessions == 3 and t.read_as.endswith("; 3 sessions (by turn)")


def test_monitor_of_session_traces_reports_by_turn(tmp_path):
    """Three sessions of 3, 2 and 2 turns as OTLP JSON; the last turn of each session is
    answered with a contradiction, so the per-turn figures differ."""
    traces, n = [], 0
    for session, turns in (("s-1", 3), ("s-2", 2), ("s-3", 2)):
        for k in range(1, turns + 1):
            n += 1
            said = FACT.replace("5", "9") if k == turns else FACT
            traces.append(rag_trace(n, "How long do refunds take?", said,
                                    [("kb/a", FACT, 0.9)], start_ms=60_000 * k,
                                    session=session))
    traces.append(rag_trace(n + 1, "How long do refunds take?", FACT, [("kb/a", FACT, 0.9)],
                            session=None))  # not in a conversation: in no turn
    f = write_lines(tmp_path / "traces.jsonl", list(reversed(traces)))
    r = run_cli("monitor", str(f), "monitor.sample_rate=1", "tracking=none",
                "grader=heuristic", f"cache_dir={tmp_path / 'c'}",
                f"hydra.run.dir={tmp_path / 'm'}", cwd=tmp_path)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert "8 traces; 3 sessions (by turn)" in r.stdout
    doc = json.loads((tmp_path / "m" / "monitor.json").read_text())
    assert doc["sessions"] == 3 and doc["lines_in_sessions"] == 7
    by = doc["by_turn"]
    assert list(by) == ["1", "2", "3"]
    assert [by[t]["lines"] for t in by] == [3, 3, 1]
    assert [by[t]["judged"] for t in by] == [3, 3, 1]
    # turn 1 is never a last turn; turn 2 is the last of two sessions, turn 3 of one
    assert [by[t]["contradicted_lines"] for t in by] == [0, 2, 1]
    # and the console shows the same figures per turn, below the windows
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("turn ")]
    assert [(row[1], row[2]) for row in rows] == [("1", "3"), ("2", "3"), ("3", "1")]
