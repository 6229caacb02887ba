"""Records and replayed lines: records written once a second still survive a SIGKILL,
record lines equal ``json.dumps``, replayed lines are the output schema's dump (kept
parsed, or indexed in a large file), bad replayed values fail their case, token counts,
plots drawn on demand, metrics.json equal to the aggregation of the records."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raglab.data.record import CaseRecord
from raglab.data.schema import SystemOutput
from raglab.errors import UserError
from raglab.runner.records import record_line
from raglab.systems import replay as replay_mod
from raglab.text.normalize import count_tokens


def _record(i: int, **extra) -> CaseRecord:
    return CaseRecord.model_validate({"case_id": f"c{i}", "tags": {"t": "é"},
                                      "gold": {"answerable": True},
                                      "output": {"case_id": f"c{i}", "x": [1.5, 1e-7, None]},
                                      "metrics": {"m": i / 3}, "error": None, **extra})


def test_flushed_records_survive_a_sigkill_between_fsyncs(tmp_path):
    path = tmp_path / "records.jsonl"
    child = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from raglab.data.record import CaseRecord
        from raglab.runner.records import RecordWriter
        w = RecordWriter(Path({str(path)!r}), fsync_interval_s=3600)  # no fsync before the kill
        for i in range(50):
            rec = {{"case_id": f"c{{i}}", "gold": {{"answerable": True}}}}
            w.append(CaseRecord.model_validate(rec))
        print("written", flush=True)
        time.sleep(60)
    """)
    p = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "written"
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == -signal.SIGKILL
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert [r["case_id"] for r in rows] == [f"c{i}" for i in range(50)]


def test_record_line_is_the_json_of_the_record_and_refuses_nan():
    rec = _record(1, severity_one=[{"rank": 1}])
    line = record_line(rec)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == json.loads(json.dumps(rec.to_json(), ensure_ascii=False))
    assert list(json.loads(line)) == list(rec.to_json())  # same fields, same order
    assert "é".encode() in line  # UTF-8, not escaped, as ensure_ascii=False
    with pytest.raises(ValueError):
        record_line(_record(2, metrics={"m": float("nan")}))
    # the text "NaN" in a string is not a number: the line is written
    assert json.loads(record_line(_record(3, error="NaN Infinity")))["error"] == "NaN Infinity"


LINES = [
    {"case_id": "a"},
    {"case_id": "b", "candidates": [{"doc_id": "d", "score": 3}, {"doc_id": "e", "text": "t",
                                     "start": 0, "end": 4, "metadata": {"k": [1]}}],
     "context": [{"doc_id": "d"}], "answer": "x [1]",
     "citations": [{"sentence": 0}, {"sentence": 1, "context": [0]}],
     "latency_ms": {"retrieve": 2}, "usage": {"input_tokens": 5}},
    {"case_id": "c", "answer": None, "candidates": [{"end": 2, "doc_id": "z", "score": None}]},
    {"usage": {"input_tokens": 5.0}, "case_id": "e", "model": "m", "latency_ms": {"r": 1.5},
     "candidates": [{"doc_id": "d", "text": "t", "score": 1.5, "start": 0, "end": 1},
                    {"score": 2.5, "doc_id": "d", "text": "t", "start": 0, "end": 1}]},
    {"case_id": "f", "model": None, "extra": {"trace": "x"}, "citations": [{"sentence": 0}],
     "context": [{"doc_id": "d", "text": "t", "score": 1.0, "start": 0, "end": 1,
                  "metadata": None}, {"metadata": {"k": 1}, "doc_id": "d"}]},
    {"case_id": "g", "candidates": [{"doc_id": "d", "text": "t", "score": 1.0}],
     "latency_ms": {"r": 1.0, "g": 2}},
    {"case_id": "h", "candidates": [{"doc_id": "d", "text": "t", "score": True}]},
    {"case_id": "i", "candidates": [{"doc_id": "d", "text": "t", "score": "2.5"}]},
]


@pytest.mark.parametrize("obj, message", [
    ({"case_id": "a", "candidates": [{"doc_id": "d", "start": -1}]}, "candidates.0.start"),
    # a field of the system's own is kept (issue 24); one that contradicts itself is not
    ({"case_id": "a", "oops": 1, "extra": {"oops": 2}}, "'oops' is also in its 'extra'"),
    ({"candidates": []}, "missing field 'case_id'"),
    ({"case_id": "a", "candidates": [{"doc_id": ""}]}, "candidates.0.doc_id"),
])
def test_a_bad_replay_line_names_file_line_and_field(tmp_path, obj, message):
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps({"case_id": "ok"}) + "\n" + json.dumps(obj) + "\n")

    class Cfg:
        class system:  # noqa: N801
            pass

    Cfg.system.path = str(path)
    with pytest.raises(UserError) as e:
        replay_mod.ReplaySystem(Cfg.system)
    assert message in str(e.value) and ":2" in str(e.value)


def test_large_replay_files_are_indexed_and_read_per_case(tmp_path, monkeypatch):
    from raglab.systems.base import SystemRequest

    path = tmp_path / "out.jsonl"
    path.write_text("\ufeff" + "".join(json.dumps(o) + "\n\n" for o in LINES), encoding="utf-8")

    class Cfg:
        class system:  # noqa: N801
            pass

    Cfg.system.path = str(path)
    kept = replay_mod.ReplaySystem(Cfg.system)
    monkeypatch.setattr(replay_mod, "KEEP_PARSED_BYTES", 0)
    indexed = replay_mod.ReplaySystem(Cfg.system)
    assert indexed.index and not indexed.outputs and kept.outputs and not kept.index
    for o in LINES:
        req = SystemRequest(o["case_id"], "q", {}, None)
        want = SystemOutput.model_validate(o).model_dump()
        got = indexed.answer(req)
        assert got == kept.answer(req) == want
        assert json.dumps(got) == json.dumps(want)  # the same keys in the same order
    with pytest.raises(LookupError):
        indexed.answer(SystemRequest("nope", "q", {}, None))
    # a file changed after it was checked is not read as if it were checked
    with open(path, "ab") as fh:
        fh.write(b"\n")
    with pytest.raises(replay_mod.ReplayedValueError, match="changed after it was checked"):
        indexed.answer(SystemRequest("a", "q", {}, None))


_HEAD = {"doc_id": "d", "text": "t", "score": 1.5, "start": 0, "end": 1}


@pytest.mark.parametrize("hits", [
    [_HEAD, _HEAD, _HEAD],  # the usual shape: every hit without metadata
    [{**_HEAD, "metadata": None}] * 2,  # every hit with all six fields
    [_HEAD, {**_HEAD, "metadata": {"k": 1}}],  # the first hit's shape, then another
    [{**_HEAD, "metadata": None}, _HEAD],
    [_HEAD, {k: _HEAD[k] for k in ("doc_id", "score", "text", "start", "end")}],  # order
    [_HEAD, {"doc_id": "e", "text": "t", "score": 2.5, "start": 0, "metadata": None}],
    [_HEAD, {"doc_id": "e"}, {**_HEAD, "metadata": None}],
    [{"text": "t", "doc_id": "d"}, {"text": "t", "doc_id": "d"}],  # same shape, not ours
])
@pytest.mark.parametrize("keep", [True, False])
def test_hits_of_any_shapes_read_again_are_the_model_dump(tmp_path, monkeypatch, hits, keep):
    """A line's hits are taken as read only when all of them have the first hit's keys, in
    the model's order (with or without metadata); any other mix is put in the dump's
    form hit by hit, whether the file is kept parsed or read again per case."""
    if not keep:
        monkeypatch.setattr(replay_mod, "KEEP_PARSED_BYTES", 0)
    obj = {"case_id": "a", "candidates": hits, "context": hits[:1]}
    answer = _replayed(tmp_path, json.dumps(obj) + "\n")
    want = SystemOutput.model_validate(obj).model_dump()
    got = answer("a")
    assert json.dumps(got) == json.dumps(want)  # the same keys in the same order


def test_nan_in_the_metadata_of_a_later_hit_fails_its_case(tmp_path):
    """Hits without metadata before the one with it: that hit's NaN is still found."""
    hits = [{"doc_id": "d"}] * 5
    line = json.dumps({"case_id": "bad", "candidates": hits, "context": hits})
    line = line[:-2] + ', {"doc_id": "d", "metadata": {"x": {"y": [1, NaN]}}}]}'
    ok = json.dumps({"case_id": "ok", "candidates": hits})
    answer = _replayed(tmp_path, ok + "\n" + line + "\n")
    assert len(answer("ok")["candidates"]) == 5
    with pytest.raises(replay_mod.ReplayedValueError, match="NaN"):
        answer("bad")


def test_a_bad_replay_line_names_its_case_id(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps({"case_id": "ok"}) + "\n"
                    + json.dumps({"case_id": "q7", "candidates": [{"doc_id": "d",
                                                                   "score": "high"}]}) + "\n")

    class Cfg:
        class system:  # noqa: N801
            pass

    Cfg.system.path = str(path)
    with pytest.raises(UserError) as e:
        replay_mod.ReplaySystem(Cfg.system)
    assert str(e.value).startswith(f"{path}:2 case q7: ")
    assert "candidates.0.score" in str(e.value)


_hit_value = st.fixed_dictionaries({"doc_id": st.sampled_from(["d", ""])}, optional={
    "text": st.sampled_from(["", "t\u00e9"]),
    "score": st.one_of(st.none(), st.integers(-3, 3), st.floats(-3, 3), st.just("1.5"),
                       st.booleans()),
    "start": st.one_of(st.none(), st.integers(0, 3), st.just(1.0)),
    "end": st.one_of(st.none(), st.integers(0, 3)),
    "metadata": st.one_of(st.none(), st.just({"k": [1, 2.5]}))})
_figures = st.dictionaries(st.sampled_from(["a", "b"]),
                           st.one_of(st.integers(0, 9), st.floats(0, 9), st.just("2")))


@given(st.fixed_dictionaries({"case_id": st.just("c")}, optional={
    "candidates": st.lists(_hit_value, max_size=3), "context": st.lists(_hit_value, max_size=2),
    "answer": st.one_of(st.none(), st.just("x")),
    "citations": st.lists(st.fixed_dictionaries({"sentence": st.integers(0, 1)}, optional={
        "context": st.lists(st.integers(0, 1), max_size=2)}), max_size=2),
    "latency_ms": _figures, "usage": _figures,
    "model": st.one_of(st.none(), st.just("m")),
    "extra": st.one_of(st.none(), st.just({"trace": 1}))}), st.randoms())
@settings(max_examples=300, deadline=None)
def test_a_checked_line_read_again_is_what_the_model_dump_gives(obj, rnd):
    """An indexed line, validated when the system was built, is read again as plain JSON:
    it must give exactly what validating it gives (keys, order, defaults, types), or be
    validated again."""
    from pydantic import ValidationError
    from pydantic_core import from_json

    for stage in ("candidates", "context"):
        for i, hit in enumerate(obj.get(stage, [])):
            pairs = list(hit.items())
            rnd.shuffle(pairs)
            obj[stage][i] = dict(pairs)
    items = list(obj.items())
    rnd.shuffle(items)  # any key order
    raw = json.dumps(dict(items)).encode()
    try:
        want = SystemOutput.model_validate_json(raw).model_dump()
    except ValidationError:
        return
    got = replay_mod.as_dumped(from_json(raw))
    if got is not None:
        assert json.dumps(got) == json.dumps(want)
        assert [type(v) for v in got["latency_ms"].values()] == \
            [type(v) for v in want["latency_ms"].values()]


@pytest.mark.parametrize("text", ["", "a b\tc\nd", "  x\u00a0y\u2003z\u3000w \x1cv", "\u200bq"])
def test_token_count_unchanged(text):
    assert count_tokens(text) == len(re.findall(r"\S+", text))


def test_report_without_plots_says_how_to_draw_them(tmp_path):
    from raglab.report.run_report import write_run_report

    metrics = {"overall": {"candidate.evidence_recall@1": 0.5, "candidate.evidence_recall@5": 1.0},
               "slices": {"t": {"a": {"n": 1, "final.evidence_recall": 0.5}}},
               "metric_versions": {}, "n_cases": 1, "n_quarantined": 0, "errors": 0, "work": {}}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    (tmp_path / "slices.png").write_bytes(b"stale")
    paths = write_run_report(tmp_path, plots=False)
    assert paths == [tmp_path / "report.md", tmp_path / "report.html"]
    assert not list(tmp_path.glob("*.png"))
    text = (tmp_path / "report.md").read_text()
    assert f"python -m raglab.report.run_report {tmp_path}" in text
    drawn = subprocess.run([sys.executable, "-m", "raglab.report.run_report", str(tmp_path)],
                           capture_output=True, text=True)
    assert drawn.returncode == 0, drawn.stderr
    assert (tmp_path / "recall_at_k.png").is_file() and "not drawn" not in \
        (tmp_path / "report.md").read_text()


def test_metrics_json_equals_the_aggregation_of_the_written_records(tmp_path):
    """metrics.json is built from the slim copies kept in memory: it must equal what the
    records file gives (every slice, every metric, the diagnosis counts)."""
    from raglab.data.record import read_records
    from raglab.metrics.aggregate import Aggregation, diagnosis_counts
    from raglab.metrics.case import metric_names
    from tests.benchmarks.replay_data import make

    paths = make(tmp_path / "data", 30, depth=20, n_slices=6, n_docs=50)
    run_dir = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "raglab.cli", "run", "system=replay",
                        f"system.path={paths['outputs']}", f"dataset.corpus={paths['corpus']}",
                        f"dataset.cases={paths['cases']}", "dataset.labels=null",
                        "grader=heuristic", "tracking=none", f"hydra.run.dir={run_dir}",
                        f"cache_dir={tmp_path / 'cache'}", "progress=off"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    m = json.loads((run_dir / "metrics.json").read_text())
    records = [r.to_json() for r in read_records(run_dir / "records.jsonl")]
    summed = Aggregation(metric_names([1, 3, 5, 10, 20, 50, 100], 5, 50))
    summed.add(records)
    agg = summed.result()
    assert m["overall"] == agg["overall"] and m["slices"] == agg["slices"]
    assert m["diagnoses"] == diagnosis_counts(records)
    assert m["n_cases"] == len(records) == 30


def _replayed(tmp_path, text: str):
    from raglab.systems.base import SystemRequest

    path = tmp_path / "out.jsonl"
    path.write_bytes(text.encode("utf-8"))

    class Cfg:
        class system:  # noqa: N801
            pass

    Cfg.system.path = str(path)
    system = replay_mod.ReplaySystem(Cfg.system)
    return lambda cid: system.answer(SystemRequest(cid, "q", {}, None))


@pytest.mark.parametrize("key", ['"metadata"', '"\\u006detadata"', '"meta\\u0064ata"'])
def test_nan_in_replayed_metadata_fails_its_case_however_the_key_is_spelled(tmp_path, key):
    ok = json.dumps({"case_id": "ok", "candidates": [{"doc_id": "d"}]})
    bad = '{"case_id": "bad", "candidates": [{"doc_id": "d", ' + key + ': {"x": [NaN]}}]}'
    answer = _replayed(tmp_path, ok + "\n   \n" + bad + "\n\t\n")
    assert answer("ok")["candidates"][0]["metadata"] is None
    with pytest.raises(replay_mod.ReplayedValueError, match="NaN"):
        answer("bad")


def test_deep_replayed_metadata_fails_its_case(tmp_path):
    deep = "[" * 150 + "]" * 150
    line = '{"case_id": "deep", "candidates": [{"doc_id": "d", "metadata": {"x": ' + deep + "}}]}"
    answer = _replayed(tmp_path, line + "\n")
    with pytest.raises(replay_mod.ReplayedValueError, match="deeper"):
        answer("deep")


hit = st.fixed_dictionaries({
    "doc_id": st.sampled_from(["a", "b", "missing"]),
    "start": st.one_of(st.none(), st.integers(0, 30)),
    "end": st.one_of(st.none(), st.integers(0, 30))})
schema_hit = hit.filter(lambda h: h["start"] is None or h["end"] is None
                        or h["end"] >= h["start"])


@settings(max_examples=400, deadline=None)
@given(candidates=st.lists(schema_hit, max_size=6), context=st.lists(schema_hit, max_size=3))
def test_span_check_refuses_exactly_the_hits_the_rule_refuses(candidates, context):
    """The check equals the per-hit rule, on hits the output schema passed (a reversed span
    is the schema's: raglab.data.schema.forward_spans): a span lies inside its document
    when the corpus has it; start and end are both given or neither."""
    from raglab.runner.case import check_spans

    class DS:
        doc_lengths = {"a": 10, "b": 20}

        class corpus:  # noqa: N801
            @staticmethod
            def get(doc_id):
                from types import SimpleNamespace

                n = DS.doc_lengths.get(doc_id)
                return None if n is None else SimpleNamespace(text="x" * n)

    def bad(h):
        s, e = h["start"], h["end"]
        if (s is None) != (e is None):
            return True
        return e is not None and (e < s or e > DS.doc_lengths.get(h["doc_id"], e))

    out = {"candidates": candidates, "context": context}
    first_bad = next((stage for stage in ("candidates", "context")
                      if any(bad(h) for h in out[stage])), None)
    if first_bad is None:
        check_spans(out, DS)
    else:
        with pytest.raises(ValueError, match=f"^{first_bad} hit"):
            check_spans(out, DS)


def test_a_reversed_replayed_span_fails_its_case_and_a_bad_index_the_file(tmp_path):
    """A reversed hit span is a value that fails its own case (README "Odd input"); a line
    the output schema refuses for anything else is refused with one line."""
    ok = json.dumps({"case_id": "ok"})
    rev = json.dumps({"case_id": "rev", "candidates": [{"doc_id": "d", "start": 9, "end": 3}]})
    answer = _replayed(tmp_path, ok + "\n" + rev + "\n")
    assert answer("ok")["case_id"] == "ok"
    with pytest.raises(replay_mod.ReplayedValueError,
                       match=r"out.jsonl:2: candidates hit 1 \(d\): span 9-3 is not a forward"):
        answer("rev")
    both = json.dumps({"case_id": "both", "candidates": [{"doc_id": "d", "start": 9, "end": 3}],
                       "citations": [{"sentence": 0, "context": [-1]}]})
    with pytest.raises(UserError, match="out.jsonl:2"):
        _replayed(tmp_path, ok + "\n" + both + "\n")


def test_a_reversed_span_after_hits_without_spans_is_named_by_stage_and_rank(tmp_path):
    """The output schema checks the span order once per list of hits (not hit by hit):
    a reversed span after hits with no span, in the context, is still the case's failure
    naming the file, line, stage and hit, and the error is the schema's own type."""
    from pydantic import ValidationError

    hits = [{"doc_id": "a"}, {"doc_id": "b", "start": 2, "end": None},
            {"doc_id": "c", "start": 7, "end": 4}]
    rev = json.dumps({"case_id": "rev", "candidates": [{"doc_id": "a", "start": 0, "end": 1}],
                      "context": hits})
    answer = _replayed(tmp_path, json.dumps({"case_id": "ok"}) + "\n" + rev + "\n")
    with pytest.raises(replay_mod.ReplayedValueError,
                       match=r"out.jsonl:2: context hit 3 \(c\): span 7-4 is not a forward"):
        answer("rev")
    with pytest.raises(ValidationError) as e:
        SystemOutput.model_validate(json.loads(rev))
    [err] = e.value.errors()
    assert (err["type"], err["loc"], err["ctx"]["hit"]) == ("reversed_span", ("context",), 3)
    assert "hit 3: span 7-4 is reversed" in str(e.value)
    assert SystemOutput.model_validate({"case_id": "c", "context": hits[:2]}).context[1].end \
        is None  # half a span passes the schema (the run's span check fails its case)


def test_monitored_traffic_refuses_a_reversed_span():
    from pydantic import ValidationError

    from raglab.monitor.traffic import TrafficLine

    line = {"question": "q", "timestamp": "2026-01-01T00:00:00Z", "answer": "a",
            "candidates": [{"doc_id": "d", "start": 5, "end": 1}]}
    with pytest.raises(ValidationError, match="hit 1: span 5-1 is reversed"):
        TrafficLine.model_validate(line)
