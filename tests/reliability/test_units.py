"""Issue 10, in process: each defect of items 2-4 and 7 with a test that failed before."""

from __future__ import annotations

import errno
import json
import os
import sqlite3

import pytest

from raglab.data.io import iter_json_lines
from raglab.errors import StorageError, UserError
from raglab.runner.run import Run
from raglab.runner.summary import error_rate_exceeded
from tests.conftest import TINY_CASES, TINY_CORPUS, write_jsonl
from tests.runner.test_run_in_process import _cfg


def _strict_load(text: str):
    def refuse(name):
        raise AssertionError(f"{name} written")
    return json.loads(text, parse_constant=refuse)


# ---- 2. non-finite numbers ---------------------------------------------------------------
@pytest.mark.parametrize("raw", ['{"id": "c", "x": NaN}', '{"id": "c", "x": Infinity}',
                                 '{"id": "c", "x": -Infinity}'])
def test_non_finite_numbers_in_a_data_file_are_one_line_with_file_and_line(tmp_path, raw):
    p = tmp_path / "cases.jsonl"
    p.write_text('{"id": "a"}\n' + raw + "\n")
    with pytest.raises(UserError) as e:
        list(iter_json_lines(p, "cases file"))
    assert f"{p}:2" in str(e.value) and "non-finite" in str(e.value)


def test_a_dataset_grade_of_infinity_is_refused(tmp_path):
    from raglab.data.dataset import load_dataset

    cases = [dict(TINY_CASES[0])]
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    p = tmp_path / "cases.jsonl"
    p.write_text(json.dumps(cases[0]).replace('"grade": 2', '"grade": Infinity') + "\n")
    with pytest.raises(UserError, match=r"cases.jsonl:1 case t-1: non-finite"):
        load_dataset(corpus, p)


def test_a_replayed_nan_fails_that_case_and_the_run_goes_on(tmp_path):
    outputs = [{"case_id": c["id"], "answer": "x", "candidates": [{"doc_id": "kb/a",
                                                                   "score": 1.0}]}
               for c in TINY_CASES]
    text = "".join(json.dumps(o) + "\n" for o in outputs).replace('"score": 1.0', '"score": NaN', 1)
    (tmp_path / "out.jsonl").write_text(text)
    cfg, yaml_text = _cfg(tmp_path, "system=replay", f"system.path={tmp_path / 'out.jsonl'}")
    metrics = Run(cfg, tmp_path / "run", yaml_text).execute()
    raw = (tmp_path / "run" / "records.jsonl").read_text()
    recs = [_strict_load(x) for x in raw.splitlines()]
    assert metrics["n_cases"] == 4 and metrics["errors"] == 1
    assert "non-finite" in recs[0]["error"] and "out.jsonl:1" in recs[0]["error"]
    assert all(r["error"] is None for r in recs[1:])
    _strict_load((tmp_path / "run" / "metrics.json").read_text())


def test_a_python_system_returning_infinity_fails_that_case(tmp_path, monkeypatch):
    mod = tmp_path / "inf_sys.py"
    mod.write_text("from raglab.data.schema import SystemOutput\n"
                   "class S:\n"
                   "    def answer(self, r):\n"
                   "        meta = {'w': float('inf')} if r.case_id == 't-2' else {}\n"
                   "        return {'case_id': r.case_id, 'answer': 'a',\n"
                   "                'candidates': [{'doc_id': 'kb/a', 'metadata': meta}]}\n"
                   "def make(opts):\n    return S()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg, text = _cfg(tmp_path, "system=python", "system._target_=inf_sys.make")
    metrics = Run(cfg, tmp_path / "run", text).execute()
    recs = [_strict_load(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert metrics["errors"] == 1
    assert "non-finite" in next(r for r in recs if r["case_id"] == "t-2")["error"]


# ---- 3. failures heal; storage failures stop the run -------------------------------------
def _flaky_module(tmp_path, monkeypatch, name="flaky_sys"):
    """A python system that fails while the file DOWN exists."""
    (tmp_path / name).with_suffix(".py").write_text(
        "import os\n"
        f"DOWN = {str(tmp_path / 'DOWN')!r}\n"
        "class S:\n"
        "    def answer(self, r):\n"
        "        if os.path.exists(DOWN):\n"
        "            raise ConnectionError('system under test is down')\n"
        "        return {'case_id': r.case_id, 'answer': 'ok [1]',\n"
        "                'candidates': [{'doc_id': 'kb/a'}], 'context': [{'doc_id': 'kb/a'}]}\n"
        "def make(opts):\n    return S()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"system._target_={name}.make"


def test_errored_cases_are_retried_on_resume_and_the_rest_reused(tmp_path, monkeypatch):
    target = _flaky_module(tmp_path, monkeypatch)
    cfg, text = _cfg(tmp_path, "system=python", target)
    (tmp_path / "DOWN").write_text("")
    first = Run(cfg, tmp_path / "run", text).execute()
    assert first["errors"] == 4
    assert error_rate_exceeded(first, cfg.max_error_rate)  # every case failed: exit 1
    (tmp_path / "DOWN").unlink()
    healed = Run(cfg, tmp_path / "run", text).execute()
    recs = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert healed["errors"] == 0 and healed["n_cases"] == 4
    assert sorted(r["case_id"] for r in recs) == sorted(c["id"] for c in TINY_CASES)
    assert error_rate_exceeded(healed, cfg.max_error_rate) is None


def test_error_rate_rule():
    assert error_rate_exceeded({"n_cases": 10, "errors": 5}, 0.5) is None
    assert "6 of 10" in error_rate_exceeded({"n_cases": 10, "errors": 6}, 0.5)
    assert error_rate_exceeded({"n_cases": 3, "errors": 3}, 1.0)  # all failed: always
    assert error_rate_exceeded({"n_cases": 3, "errors": 0}, 0.0) is None


def test_a_full_disk_in_the_stage_cache_stops_the_run_and_keeps_what_was_written(
        tmp_path, monkeypatch):
    from raglab.cache import StageCache

    cfg, text = _cfg(tmp_path)
    real_db = StageCache._db
    calls = {"n": 0}

    class FullDisk:  # the sqlite connection of a disk that fills after a few writes
        def __init__(self, conn):
            self.conn = conn

        def execute(self, sql, *args):
            if sql.startswith("INSERT"):
                calls["n"] += 1
                if calls["n"] > 6:
                    raise sqlite3.OperationalError("database or disk is full")
            return self.conn.execute(sql, *args)

    monkeypatch.setattr(StageCache, "_db", lambda self: FullDisk(real_db(self)))
    with pytest.raises(StorageError, match="cannot write the stage cache.*disk is full"):
        Run(cfg, tmp_path / "run", text).execute()
    kept = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()] \
        if (tmp_path / "run" / "records.jsonl").exists() else []
    assert all(r["error"] is None for r in kept)  # no case froze the disk error
    monkeypatch.setattr(StageCache, "_db", real_db)
    healed = Run(cfg, tmp_path / "run", text).execute()
    assert healed["errors"] == 0 and healed["n_cases"] == 4


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO, errno.EROFS])
def test_a_failed_record_write_stops_the_run_with_complete_lines_only(tmp_path, monkeypatch,
                                                                      code):
    cfg, text = _cfg(tmp_path)
    real = os.fsync
    seen = {"n": 0}

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("records.jsonl"):
            seen["n"] += 1
            if seen["n"] == 3:
                raise OSError(code, os.strerror(code))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr("raglab.runner.records.FSYNC_INTERVAL_S", 0.0)  # fsync every line
    with pytest.raises(StorageError, match="cannot write records.jsonl"):
        Run(cfg, tmp_path / "run", text).execute()
    data = (tmp_path / "run" / "records.jsonl").read_text()
    assert data.endswith("\n") and len(data.splitlines()) == 2
    monkeypatch.setattr(os, "fsync", real)
    assert Run(cfg, tmp_path / "run", text).execute()["n_cases"] == 4


def test_a_failed_last_fsync_stops_the_run_before_metrics_json(tmp_path, monkeypatch):
    """The last fsync of records.jsonl runs in a thread while the metrics are aggregated;
    if it fails, the run stops with one line and writes no metrics.json (a resume heals)."""
    cfg, text = _cfg(tmp_path)
    real = os.fsync

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("records.jsonl"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr("raglab.runner.records.FSYNC_INTERVAL_S", 3600.0)  # the last only
    with pytest.raises(StorageError, match="cannot write records.jsonl: Input/output error"):
        Run(cfg, tmp_path / "run", text).execute()
    assert not (tmp_path / "run" / "metrics.json").exists()
    assert len((tmp_path / "run" / "records.jsonl").read_text().splitlines()) == 4
    monkeypatch.setattr(os, "fsync", real)
    assert Run(cfg, tmp_path / "run", text).execute()["n_cases"] == 4


def test_an_unwritable_cache_dir_is_one_line(tmp_path):
    from raglab.cache import StageCache

    (tmp_path / "file").write_text("")
    with pytest.raises(StorageError, match="cannot write the stage cache"):
        StageCache(tmp_path / "file" / "cache")


# ---- 4. run-directory identity and locking ----------------------------------------------
def test_a_changed_dataset_is_refused_on_resume(tmp_path):
    from raglab.runner.identity import DatasetChangedError

    cfg, text = _cfg(tmp_path)
    Run(cfg, tmp_path / "run", text).execute()
    cases = [dict(c) for c in TINY_CASES]
    cases[1]["question"] = "When do the nightly exports run?"
    write_jsonl(tmp_path / "cases.jsonl", cases)
    with pytest.raises(DatasetChangedError, match="the dataset changed.*cases"):
        Run(cfg, tmp_path / "run", text).execute()
    assert json.loads((tmp_path / "run" / "run.json").read_text())["dataset"]["cases_sha256"]


def test_a_second_process_in_the_run_directory_is_refused(tmp_path):
    from raglab.runner.lock import RunDirLock, RunDirLocked

    cfg, text = _cfg(tmp_path)
    (tmp_path / "run").mkdir()
    holder = RunDirLock(tmp_path / "run").acquire()  # another open file: another holder
    try:
        with pytest.raises(RunDirLocked, match="another raglab process"):
            Run(cfg, tmp_path / "run", text).execute()
    finally:
        holder.release()
    assert Run(cfg, tmp_path / "run", text).execute()["n_cases"] == 4


def test_temp_files_have_unique_names_and_the_users_umask(tmp_path):
    from raglab.data.io import atomic_write_text

    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "a.json", "x")
    finally:
        os.umask(old)
    assert oct((tmp_path / "a.json").stat().st_mode & 0o777) == oct(0o640)
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


# ---- 7. loose validation -----------------------------------------------------------------
def _case(**over):
    c = {"id": "c1", "question": "q?", "answerable": False}
    c.update(over)
    return c


@pytest.mark.parametrize("line, match", [
    ('{"id": "c1", "question": "q\\ud800?"}', "lone surrogate"),
    (json.dumps(_case(question="   \t ")), "only whitespace"),
    (json.dumps(_case(answerable="yes")), "answerable"),
    (json.dumps(_case(answerable=1)), "answerable"),
    ("[" * 1000 + "]" * 1000, "nested deeper|expected a JSON object"),
    ('{"id": "c1", "question": "q", "tags": ' + '{"a": ' * 500 + "1" + "}" * 500 + "}",
     "nested deeper"),
])
def test_loose_case_values_are_refused_with_file_and_line(tmp_path, line, match):
    from raglab.data.dataset import load_cases

    p = tmp_path / "cases.jsonl"
    p.write_text(line + "\n")
    with pytest.raises(UserError, match=match) as e:
        load_cases(p)
    assert f"{p}:1" in str(e.value)


@pytest.mark.parametrize("out, match", [
    ({"case_id": "c", "citations": [{"sentence": 0, "context": [-1]}]}, "greater than or equal"),
    ({"case_id": "c", "candidates": [{"doc_id": "d", "start": 9, "end": 3}]}, "reversed"),
    ({"case_id": "c", "candidates": [{"doc_id": "d", "start": True, "end": 3}]}, "integer"),
])
def test_loose_system_outputs_are_refused(out, match):
    from pydantic import ValidationError

    from raglab.data.schema import SystemOutput

    with pytest.raises(ValidationError, match=match):
        SystemOutput.model_validate(out)


def test_a_hit_span_beyond_its_document_fails_the_case(tmp_path):
    from raglab.data.dataset import load_dataset
    from raglab.runner.case import check_spans

    ds = load_dataset(write_jsonl(tmp_path / "c.jsonl", TINY_CORPUS),
                      write_jsonl(tmp_path / "k.jsonl", TINY_CASES))
    with pytest.raises(ValueError, match="outside the document"):
        check_spans({"candidates": [{"doc_id": "kb/b", "start": 0, "end": 10_000}]}, ds)
    check_spans({"candidates": [{"doc_id": "kb/b", "start": 0, "end": 10}]}, ds)


def _hit(doc_id, start, end):
    return {"doc_id": doc_id, "start": start, "end": end}


@pytest.mark.parametrize("context, match", [
    ([_hit("kb/b", 0, 10), _hit("nowhere", 5, 10_000)], None),  # a document not in the corpus
    ([_hit("kb/b", 0, 10), _hit("kb/b", 0, 10_000)], "hit 2 .*outside the document"),
    ([_hit("kb/b", 0, 10), _hit("kb/b", None, None)], None),
    ([_hit("kb/b", None, None), _hit("kb/b", 0, 10_000)], "hit 2 .*outside the document"),
    ([_hit("kb/b", 0, 10), _hit("kb/b", 3, None)], "hit 2 .*not a forward range"),
])
def test_every_bad_span_fails_the_case_with_or_without_spans_on_each_hit(tmp_path, context,
                                                                         match):
    """Spans are checked in bulk when every hit has one, hit by hit otherwise: the same
    failures, naming the same hit, either way."""
    from raglab.data.dataset import load_dataset
    from raglab.runner.case import check_spans

    ds = load_dataset(write_jsonl(tmp_path / "c.jsonl", TINY_CORPUS),
                      write_jsonl(tmp_path / "k.jsonl", TINY_CASES))
    if match is None:
        check_spans({"candidates": [], "context": context}, ds)
    else:
        with pytest.raises(ValueError, match="context " + match):
            check_spans({"candidates": [], "context": context}, ds)


@pytest.mark.parametrize("override, match", [("k=true", "k"), ("concurrency=true", "concurrency"),
                                             ("cache_dir=", "cache_dir")])
def test_loose_config_values_are_refused(tmp_path, override, match):
    from raglab.errors import ConfigError

    with pytest.raises(ConfigError, match=match):
        _cfg(tmp_path, override)


def test_replayed_ids_not_in_the_case_set_are_a_counted_warning(tmp_path):
    outputs = [{"case_id": c["id"], "answer": "x"} for c in TINY_CASES]
    outputs += [{"case_id": "ghost-1"}, {"case_id": "ghost-2"}]
    write_jsonl(tmp_path / "out.jsonl", outputs)
    cfg, text = _cfg(tmp_path, "system=replay", f"system.path={tmp_path / 'out.jsonl'}")
    metrics = Run(cfg, tmp_path / "run", text).execute()
    assert any("2 replayed output(s) for cases not in the case set" in w
               for w in metrics["warnings"])
