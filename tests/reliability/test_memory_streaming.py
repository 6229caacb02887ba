"""A resume reads records.jsonl one line at a time: it holds what aggregation needs of each
case, never every whole record at once (which took 18-30x the run's memory at 20,000 cases
x 100 candidates); the lines it drops are streamed out to a rewritten file. The peak
memory itself is measured by ``python -m tests.benchmarks memory``."""

import json
import weakref

from raglab.data.record import CaseRecord, RecordLines
from raglab.runner.records import RecordWriter, record_line
from raglab.runner.run import slim_record


def _record(i: int, error: str | None = None) -> CaseRecord:
    return CaseRecord.model_validate({
        "case_id": f"c{i}", "tags": {"t": "x"}, "gold": {"answerable": True},
        "output": {"case_id": f"c{i}", "answer": "a" * 1000,
                   "candidates": [{"doc_id": "d", "text": "t" * 200}] * 20},
        "metrics": {"m": i / 10}, "error": error})


def _write(path, records, tail: bytes = b"") -> None:
    with open(path, "wb") as fh:
        for r in records:
            fh.write(record_line(r))
        fh.write(tail)


def test_resume_holds_one_whole_record_at_a_time(tmp_path):
    path = tmp_path / "records.jsonl"
    _write(path, [_record(i) for i in range(40)])
    alive: list[weakref.ref] = []
    most = 0

    def keep(rec: CaseRecord) -> dict:
        nonlocal most
        alive.append(weakref.ref(rec))
        most = max(most, sum(r() is not None for r in alive))
        return slim_record(rec)

    kept = RecordWriter(path).load(keep=keep)
    assert list(kept) == [f"c{i}" for i in range(40)]
    assert most <= 2  # the record being read (and at most the one before it)
    assert all("output" not in row for row in kept.values())  # light rows only


def test_resume_streams_out_errors_duplicates_and_a_torn_line(tmp_path):
    path = tmp_path / "records.jsonl"
    records = [_record(0), _record(1, error="system: boom"), _record(2), _record(1),
               _record(2)]
    _write(path, records, tail=b'{"case_id": "c3", "gold"')  # torn by a kill
    kept = RecordWriter(path).load(keep=slim_record)
    assert sorted(kept) == ["c0", "c1", "c2"]
    lines = path.read_bytes().splitlines(keepends=True)
    # the healed c1 and the later c2 win; the file keeps them in file order, whole lines
    assert [json.loads(x)["case_id"] for x in lines] == ["c0", "c1", "c2"]
    assert lines == [record_line(records[i]) for i in (0, 3, 4)]
    assert not RecordLines(path).torn


def test_a_corrupt_line_before_the_last_is_an_error_naming_it(tmp_path):
    import pytest

    from raglab.errors import UserError

    path = tmp_path / "records.jsonl"
    path.write_bytes(record_line(_record(0)) + b"{not json\n" + record_line(_record(1)))
    with pytest.raises(UserError) as e:
        RecordWriter(path).load()
    assert e.value.line == 2
