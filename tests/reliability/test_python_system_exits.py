"""A ``system=python`` object under hostile conditions: SIGTERM while its ``answer()`` is
still running (a worker thread nobody can stop), a ``SystemExit`` raised in it, and an
answer of hundreds of megabytes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from raglab.runner.run import Run
from raglab.systems.outputs import MAX_BODY_BYTES, _size, json_size_over
from tests.conftest import REPO, TINY_CASES, TINY_CORPUS, write_jsonl
from tests.runner.test_run_in_process import _cfg

OK = ("{'case_id': r.case_id, 'answer': 'It takes 5 business days.',"
      " 'candidates': [{'doc_id': 'kb/a'}], 'context': [{'doc_id': 'kb/a'}]}")

SLEEPY = f"""
import os, time
SLOW = os.environ['RAGLAB_TEST_SLOW']
class S:
    def answer(self, r):
        if r.case_id != 't-1' and os.path.exists(SLOW):
            time.sleep(30)  # deaf to the interrupt: a worker thread cannot be stopped
        return {OK}
def make(opts):
    return S()
"""


def _cli(tmp_path, *args: str) -> tuple[list[str], dict]:
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    cmd = [sys.executable, "-m", "raglab.cli", "run", "metrics.cutoffs=[1,3,5]", "k=3",
           "candidate_depth=5", "progress=off", f"hydra.run.dir={tmp_path / 'run'}",
           f"cache_dir={tmp_path / 'cache'}", f"dataset.corpus={corpus}",
           f"dataset.cases={cases}", "dataset.labels=null", "system=python",
           "grader=heuristic", "tracking=none", *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{REPO}"
    env["RAGLAB_TEST_SLOW"] = str(tmp_path / "SLOW")
    return cmd, env


def _records(tmp_path) -> list[dict]:
    raw = (tmp_path / "run" / "records.jsonl").read_bytes()
    assert raw.endswith(b"\n")  # whole lines only
    return [json.loads(x) for x in raw.splitlines()]


# ---- SIGTERM while the system is still answering -----------------------------------------
@pytest.mark.parametrize("signals", [1, 2])
def test_sigterm_while_the_system_answers_exits_at_once_and_twice_without_traceback(
        tmp_path, signals):
    """The run used to print "interrupted" and then wait for the sleeping worker thread at
    exit (30 s here; forever for a hung call), and a second SIGTERM gave a traceback from
    ``threading.join``. CI sends SIGTERM, then SIGKILL after a few seconds. One signal
    alone must end it (a second one would end it whatever the first did)."""
    slow = tmp_path / "SLOW"
    slow.write_text("")
    (tmp_path / "sleepy.py").write_text(SLEEPY)
    cmd, env = _cli(tmp_path, "system._target_=sleepy.make", "concurrency=1")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    records = tmp_path / "run" / "records.jsonl"
    try:
        deadline = time.monotonic() + 120
        while not (records.exists() and records.read_bytes().endswith(b"\n")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.02)
        time.sleep(0.2)  # t-2 is now sleeping in the worker thread
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.02)
        if signals == 2 and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # CI's, or an impatient user's, second one
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert took < 15, f"{took:.1f} s to exit after SIGTERM (the system sleeps 30 s)"
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert "raglab: interrupted" in err and "to resume" in err
    if signals == 1:
        assert "interrupted again" not in err, err
    assert [r["case_id"] for r in _records(tmp_path)] == ["t-1"]
    assert not (tmp_path / "run" / "metrics.json").exists()  # not finished, nor looks it


@pytest.mark.slow  # a second end-to-end run
def test_a_run_stopped_while_the_system_answered_resumes(tmp_path):
    test_sigterm_while_the_system_answers_exits_at_once_and_twice_without_traceback(tmp_path, 2)
    (tmp_path / "SLOW").unlink()
    cmd, env = _cli(tmp_path, "system._target_=sleepy.make", "concurrency=1")
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert sorted(r["case_id"] for r in _records(tmp_path)) == [c["id"] for c in TINY_CASES]
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["errors"] == 0


# ---- SystemExit and its kind raised by the system ----------------------------------------
RAISER = f"""
class Mine(BaseException):
    pass
class S:
    def answer(self, r):
        if r.case_id == 't-2':
            raise SystemExit(3)
        if r.case_id == 't-3':
            raise KeyboardInterrupt('not a signal: raised in a worker thread')
        if r.case_id == 't-4':
            raise Mine('a BaseException of its own')
        return {OK}
def make(opts):
    return S()
"""


def test_a_system_exit_raised_by_the_system_is_its_cases_error(tmp_path, monkeypatch):
    """``SystemExit(3)`` in ``answer()`` used to end the run with exit 3, no message and no
    record of the case."""
    (tmp_path / "raiser.py").write_text(RAISER)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg, text = _cfg(tmp_path, "system=python", "system._target_=raiser.make")
    metrics = Run(cfg, tmp_path / "run", text).execute()
    errors = {r["case_id"]: r["error"] for r in _records(tmp_path)}
    assert errors == {"t-1": None, "t-2": "system: SystemExit: 3",
                      "t-3": "system: KeyboardInterrupt: not a signal: raised in a worker "
                             "thread",
                      "t-4": "system: Mine: a BaseException of its own"}
    assert metrics["n_cases"] == 4 and metrics["errors"] == 3


def test_a_system_exit_raised_by_the_factory_is_one_config_line(tmp_path, monkeypatch):
    from raglab.errors import ConfigError
    from raglab.systems.python import load_python_system

    (tmp_path / "quits.py").write_text("def make(opts):\n    raise SystemExit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"quits.make\(options\) raised SystemExit: 3$"):
        load_python_system("quits.make", {})


# ---- the size of an answer ---------------------------------------------------------------
BIG = f"""
import os
N = int(os.environ.get('RAGLAB_TEST_BIG', '2000'))
class S:
    def answer(self, r):
        out = {OK}
        big = 'x' * N
        if r.case_id == 't-1':
            out['answer'] = big
        elif r.case_id == 't-2':
            out['context'] = [{{'doc_id': 'kb/a', 'text': big}}]
        elif r.case_id == 't-3':
            out['trace'] = [{{'span': big}}]  # a field it added, kept in output.extra
        return out
def make(opts):
    return S()
"""


def test_an_answer_over_max_body_bytes_fails_its_case_and_nothing_big_is_written(
        tmp_path, monkeypatch):
    """Any field counts, as every byte of an http system's body does: the answer, a hit's
    text, a field the system added."""
    (tmp_path / "big_sys.py").write_text(BIG)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg, text = _cfg(tmp_path, "system=python", "system._target_=big_sys.make",
                     "+system.max_body_bytes=1500")
    metrics = Run(cfg, tmp_path / "run", text).execute()
    errors = {r["case_id"]: r["error"] for r in _records(tmp_path)}
    over = "system: OutputError: answer larger than 1500 bytes (system.max_body_bytes)"
    assert errors == {"t-1": over, "t-2": over, "t-3": over, "t-4": None}
    assert metrics["errors"] == 3
    assert (tmp_path / "run" / "records.jsonl").stat().st_size < 20_000


def test_the_python_system_takes_the_http_systems_bound():
    from raglab.systems.http import HttpSystemCfg
    from raglab.systems.python import PythonSystemCfg

    assert PythonSystemCfg(name="python", _target_="m.f").max_body_bytes == MAX_BODY_BYTES
    assert HttpSystemCfg(name="http", url="http://x").max_body_bytes == MAX_BODY_BYTES
    with pytest.raises(ValueError, match="max_body_bytes"):
        PythonSystemCfg(name="python", _target_="m.f", max_body_bytes=2 ** 31 + 1)


def test_json_size_counts_utf8_bytes_and_stops_on_an_object_that_holds_itself():
    from raglab.data.schema import SystemOutput

    assert not json_size_over({"answer": "é" * 500}, 1020)
    assert json_size_over({"answer": "é" * 500}, 1000)  # 1,000 bytes of UTF-8, and quotes
    out = SystemOutput(case_id="c", context=[{"doc_id": "d", "text": "t" * 900}])
    assert json_size_over(out, 900) and not json_size_over(out, 1200)
    assert len(out.model_dump_json()) < 1200
    shared: dict = {"text": "t" * 100}
    for _ in range(40):  # 2^40 copies as JSON, walked once each
        shared = {"x": shared, "y": shared}
    assert json_size_over(shared, MAX_BODY_BYTES)
    seen: dict[int, int] = {}
    assert _size(shared, 2 ** 62, seen, set(), 0) > 2 ** 40 and len(seen) == 41
    loop: dict = {}
    loop["a"] = loop
    loop["b"] = [loop, loop]
    assert not json_size_over(loop, 1000)  # JSON cannot hold it: its record fails the case


def test_json_size_counts_escapes_as_json_writes_them():
    """A control character is six bytes of JSON (\\u0001), a quote or a backslash two: an
    answer of 900,000 control characters is 5.4 MB in its record, not 0.9 MB."""
    for text in ["\x01" * 1000, 'say "no" \\ or \n', "é\x00\u202e", "plain"]:
        size = len(json.dumps(text, ensure_ascii=False).encode("utf-8"))
        assert json_size_over({"a": text}, size) and not json_size_over({"a": text}, size + 8)
    assert json_size_over({"answer": "\x01" * 900_000}, 1_000_000)


@pytest.mark.slow  # 2 x 200 MB strings, in a real run
def test_a_200_mb_answer_at_the_default_bound_keeps_memory_and_records_small(tmp_path):
    """200 MB answers on 2 cases wrote a 400 MB records.jsonl and peaked at 1.2 GB (3.5
    minutes, most of it grading the answers); now each case fails at the default bound."""
    (tmp_path / "big_sys.py").write_text(BIG)
    cmd, env = _cli(tmp_path, "system._target_=big_sys.make")
    env["RAGLAB_TEST_BIG"] = str(200_000_000)
    write_jsonl(tmp_path / "two.jsonl", TINY_CASES[:2])
    cmd = [a if not a.startswith("dataset.cases=") else f"dataset.cases={tmp_path / 'two.jsonl'}"
           for a in cmd]
    with open(tmp_path / "err.txt", "wb") as err:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak, not the test's
        proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 1, (tmp_path / "err.txt").read_text()  # every case failed
    over = (f"system: OutputError: answer larger than {MAX_BODY_BYTES} bytes "
            "(system.max_body_bytes)")
    assert [r["error"] for r in _records(tmp_path)] == [over, over]  # answer, context
    assert (tmp_path / "run" / "records.jsonl").stat().st_size < 20_000
    assert usage.ru_maxrss * 1024 < 500_000_000  # the system's 200 MB string, then nothing
