"""Hostile trace files: a time that is not one (NaN, Infinity, out of range) is one bad trace,
the rest read; a byte-order mark or a garbage first line does not change the format read,
and what was read is said in one line (monitor and replay, through the real CLI)."""

from __future__ import annotations

import json

import pytest

from raglab.monitor.traffic import read_traffic
from raglab.traces import problems as P
from raglab.traces.source import detect, records
from tests.conftest import run_cli
from tests.traces.otlp_build import rag_trace, request, write_lines

DOCS = [("kb/a", "Refunds are paid back to the original card within 5 business days.", 0.9),
        ("kb/b", "Exports run nightly at 02:00 UTC.", 0.5)]
BOM = b"\xef\xbb\xbf"


def _bad_time_line(field: str, raw: str, trace: int = 7) -> str:
    """A trace whose root span's ``field`` is ``raw`` (JSON text written as it is)."""
    spans = rag_trace(trace, "bad time?", "x", DOCS)
    spans[-1][field] = "@@"
    return json.dumps(request(spans)).replace('"@@"', raw)


def _read(path):
    problems = P.Problems()
    recs = [r for _, r in records(path, problems)]
    return recs, problems


@pytest.mark.parametrize("field", ["startTimeUnixNano", "endTimeUnixNano"])
@pytest.mark.parametrize("raw, shown", [
    ("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"),
    ("1e400", "Infinity"), ("-5", "-5"), (str(1 << 64), str(1 << 64)), ('"soon"', "'soon'")])
def test_a_time_that_is_not_one_is_one_bad_trace(tmp_path, field, raw, shown):
    good = [rag_trace(i, f"question {i}?", "5 days.", DOCS) for i in (1, 2, 3)]
    f = write_lines(tmp_path / "t.jsonl", [good[0], _bad_time_line(field, raw), *good[1:]])
    recs, problems = _read(f)
    assert [r["question"] for r in recs] == ["question 1?", "question 2?", "question 3?"]
    assert problems.counts == {P.BAD_TIME: 1}
    assert problems.first[P.BAD_TIME] == (
        f"{f}:2 trace {7:032x}: bad time (span 'rag': {field} is {shown}, not a count of "
        "nanoseconds since 1970 below 2**64)")
    assert problems.account(len(recs)) == "read as OTLP JSON lines: 3 traces, 1 bad trace"


def test_a_byte_order_mark_or_a_garbage_first_line_keeps_the_format(tmp_path):
    lines = [rag_trace(i, f"question {i}?", "5 days.", DOCS) for i in (1, 2)]
    bom = write_lines(tmp_path / "bom.jsonl", lines)
    bom.write_bytes(BOM + bom.read_bytes())
    assert detect(bom) == "otlp"
    recs, problems = _read(bom)
    assert len(recs) == 2 and not problems.counts
    garbage = write_lines(tmp_path / "garbage.jsonl", ["2025-12-05 log rotated", *lines])
    assert detect(garbage) == "otlp"
    recs, problems = _read(garbage)
    assert len(recs) == 2 and problems.counts == {P.MALFORMED: 1}
    assert problems.account(2).startswith(
        "read as OTLP JSON lines: 2 traces, 1 bad line (line 1: not JSON: ")
    # raglab's own traffic lines stay raglab's, after a mark or a garbage line too
    traffic = json.dumps({"question": "q?", "answer": "a", "timestamp":
                          "2025-01-01T00:00:00Z"}) + "\n"
    own = tmp_path / "own.jsonl"
    own.write_bytes(BOM + traffic.encode())
    assert detect(own) == "jsonl"
    t = read_traffic(own)
    assert len(t.lines) == 1 and not t.bad
    assert t.read_as == "read as raglab traffic JSON lines: 1 line(s)"
    own.write_text("garbage\n" + traffic)
    assert detect(own) == "jsonl"


def _hostile(tmp_path):
    """A mark, a garbage line, a trace with an infinite start, and four good traces (the
    cases of the tiny set, by case id)."""
    good = [rag_trace(i, f"question {i}?", "Within 5 business days.", DOCS,
                      case_id=f"t-{i}", start_ms=i * 1000) for i in (1, 2, 3, 4)]
    f = write_lines(tmp_path / "traces.jsonl", [
        "garbage", good[0], _bad_time_line("startTimeUnixNano", "Infinity"), *good[1:]])
    f.write_bytes(BOM + f.read_bytes())
    return f


def test_monitor_counts_a_bad_time_as_one_bad_trace_and_says_what_it_read(tmp_path):
    f = _hostile(tmp_path)
    out = run_cli("monitor", str(f), "tracking=none", "grader=heuristic",
                  "monitor.sample_rate=1", f"hydra.run.dir={tmp_path / 'mon'}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "4 lines in 1 window(s)" in out.stdout
    assert ("read as OTLP JSON lines: 4 traces, 1 bad trace, 1 bad line (line 1: not JSON: "
            in out.stdout)
    assert "bad traces: 2 (not used): malformed line 1, bad time 1" in out.stdout
    assert f"  first: {f}:3 trace {7:032x}: bad time (span 'rag': startTimeUnixNano is " \
           "Infinity" in out.stdout
    doc = json.loads((tmp_path / "mon" / "monitor.json").read_text())
    assert doc["read_as"].startswith("read as OTLP JSON lines: 4 traces")


def test_a_replay_system_reads_the_good_traces_and_warns_with_what_it_read(tmp_path):
    from types import SimpleNamespace

    from raglab.systems.replay import ReplaySystem, ReplaySystemCfg

    f = _hostile(tmp_path)
    dataset = SimpleNamespace(cases=[SimpleNamespace(id=f"t-{i}", question="?")
                                     for i in (1, 2, 3, 4)], quarantined=[])
    system = ReplaySystem(ReplaySystemCfg(name="replay", path=str(f)),
                          SimpleNamespace(dataset=dataset, run=None))
    assert sorted(system.outputs) == ["t-1", "t-2", "t-3", "t-4"]
    (w,) = system.warnings
    assert w.startswith(f"{f}: read as OTLP JSON lines: 4 traces, 1 bad trace, 1 bad line "
                        "(line 1: not JSON: ")
    assert f"{f}:3 trace {7:032x}: bad time" in w


@pytest.mark.slow  # the same through the CLI (the reader is the same: tested above)
def test_replay_reads_the_good_traces_and_warns_with_what_it_read(tmp_path, tiny):
    corpus, cases = tiny
    f = _hostile(tmp_path)
    out = run_cli("run", "system=replay", f"system.path={f}", f"dataset.corpus={corpus}",
                  f"dataset.cases={cases}", "dataset.labels=null", "tracking=none",
                  "grader=none", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert (f"raglab: warning: {f}: read as OTLP JSON lines: 4 traces, 1 bad trace, 1 bad "
            "line (line 1: not JSON: ") in out.stderr
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text()
               .splitlines()]
    assert sorted(r["case_id"] for r in records if r["output"]) == ["t-1", "t-2", "t-3",
                                                                   "t-4"]
