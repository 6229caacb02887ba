"""Worker processes for a replayed run without a grader (raglab.runner.workers): the file's
parts, the checks across them, records and metrics equal to one process's, the same error
for a bad file, and nothing lost or scored twice when the run is stopped (SIGKILL, SIGTERM)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from raglab.errors import UserError
from raglab.runner.records import RecordWriter
from raglab.runner.workers import (FINISH_SHARE, MIN_CASES_PER_PROCESS, drive, first_share,
                                   part_files, process_count)
from raglab.systems.replay import ReplaySystem, check_parts, parts
from tests.benchmarks.replay_data import make
from tests.conftest import REPO, run_cli

N_CASES = 2 * MIN_CASES_PER_PROCESS + 88  # enough for two processes


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    return make(tmp_path_factory.mktemp("replay"), N_CASES, depth=10, n_slices=5, n_docs=200)


def _args(paths: dict[str, Path], run_dir: Path, outputs: Path | None = None,
          concurrency: int = 2, progress: str = "off") -> list[str]:
    return ["run", "system=replay", f"system.path={outputs or paths['outputs']}",
            f"dataset.corpus={paths['corpus']}", f"dataset.cases={paths['cases']}",
            "dataset.labels=null", "grader=none", "tracking=none", f"hydra.run.dir={run_dir}",
            f"cache_dir={run_dir.parent / 'cache'}", f"progress={progress}",
            f"concurrency={concurrency}"]


def _records(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "records.jsonl").open(encoding="utf-8")]
    for r in rows:  # the one measured value: how long answering from memory took
        if r.get("output"):
            r["output"]["latency_ms"].pop("total")
        r["metrics"].pop("latency_ms.total", None)
    return rows


def _stable(metrics: dict) -> dict:
    """``metrics.json`` without the measured latency (answering from memory, about 1 ms)."""
    def drop(d):
        return {k: v for k, v in d.items() if not k.startswith("latency_ms.total")}

    return {"overall": drop(metrics["overall"]),
            "slices": {k: {v: drop(m) for v, m in vals.items()}
                       for k, vals in metrics["slices"].items()}}


def _cfg(path: Path):
    class System:
        name = "replay"

    System.path = str(path)

    class Cfg:
        system = System

    return Cfg


# -- the parts of a file ------------------------------------------------------------------
def test_parts_split_at_line_starts_and_cover_the_file(tmp_path):
    lines = [f'{{"case_id": "c{i}"}}\n'.encode() * 1 for i in range(10)]
    path = tmp_path / "o.jsonl"
    path.write_bytes(b"".join(lines))
    data = path.read_bytes()
    for n in (1, 2, 3, 7, 10, 25):
        got = parts(path, n)
        assert got[0][0] == 0 and got[-1][1] == len(data)
        assert all(a < b for a, b in got) and all(
            got[i][1] == got[i + 1][0] for i in range(len(got) - 1))
        assert all(s == 0 or data[s - 1:s] == b"\n" for s, _ in got)  # line starts
        assert len(got) == min(n, 10)
    path.write_bytes(b"".join(lines)[:-1])  # no newline at the end
    assert parts(path, 4)[-1][1] == len(data) - 1


def test_the_first_part_holds_about_its_share_of_the_bytes(tmp_path):
    path = tmp_path / "o.jsonl"
    path.write_bytes(b"".join(f'{{"case_id": "c{i:04d}"}}\n'.encode() for i in range(1000)))
    size = path.stat().st_size
    line = size / 1000
    for n, share in ((2, 0.45), (3, 0.2), (4, 0.5), (2, 0.0), (2, 1.0)):
        got = parts(path, n, share)
        assert got[0][0] == 0 and got[-1][1] == size
        assert all(got[i][1] == got[i + 1][0] for i in range(len(got) - 1))
        lengths = [b - a for a, b in got]
        if 0 < share < 1:
            assert len(got) == n and abs(lengths[0] - share * size) <= line
            rest = (size - lengths[0]) / (n - 1)
            assert all(abs(x - rest) <= line for x in lengths[1:])
        else:  # a share of nothing or of all: no empty part
            assert all(x > 0 for x in lengths)


def test_the_run_s_process_takes_less_so_that_every_process_ends_together():
    assert first_share(1) == 1.0
    for n in (2, 3, 4, 8):
        share = first_share(n)
        worker = (1 - share) / (n - 1)
        if share > 0.5 / n:  # the work left to the run's process besides its part
            assert share + FINISH_SHARE == pytest.approx(worker)
        assert 0 < share < 1 / n < worker
    assert first_share(64) == 0.5 / 64  # never below half an even share


def test_a_file_read_in_parts_is_the_file_read_whole(tmp_path, data):
    whole = ReplaySystem(_cfg(data["outputs"]).system)
    pieces = [ReplaySystem(_cfg(data["outputs"]).system, part=p) for p in parts(data["outputs"], 3)]
    merged = {}
    for p in pieces:
        assert not set(p.outputs) & set(merged)
        merged.update(p.outputs)
    assert merged == whole.outputs
    assert list(merged) == list(whole.outputs)  # in file order
    # line numbers: from each part's first line
    first = pieces[1]
    cid, n = next(iter(first.lines.items()))
    assert whole.lines[cid] == n + data["outputs"].read_bytes()[:first.first].count(b"\n")


def test_a_bad_line_in_a_later_part_is_named_by_its_line_in_the_file(tmp_path, data):
    rows = data["outputs"].read_text(encoding="utf-8").splitlines(True)
    rows[-3] = '{"case_id": "q-bad", "candidates": [1]}\n'
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(rows), encoding="utf-8")
    with pytest.raises(UserError) as whole:
        ReplaySystem(_cfg(path).system)
    last = parts(path, 2)[1]
    with pytest.raises(UserError) as part:
        ReplaySystem(_cfg(path).system, part=last)
    assert str(part.value) == str(whole.value)
    assert f"bad.jsonl:{len(rows) - 2} " in str(part.value)


def test_check_parts_names_the_first_repeated_line_and_refuses_an_empty_file(tmp_path):
    path = tmp_path / "o.jsonl"
    path.write_bytes(b"a\nb\nc\nd\ne\n")
    # parts starting at bytes 0, 4 (after 2 lines) and 8 (after 4 lines)
    with pytest.raises(UserError, match=r"o.jsonl:4 case y: duplicate case_id"):
        check_parts(str(path), [(0, {"x": 1, "y": 2}), (4, {"z": 1, "y": 2}),
                                (8, {"x": 1})], None, [])
    with pytest.raises(UserError, match="empty replay file"):
        check_parts(str(path), [(0, {}), (4, {})], None, [])


def test_one_process_where_forking_is_not_worth_it_or_not_safe():
    assert process_count(1, 10_000) == 1
    assert process_count(4, 2 * MIN_CASES_PER_PROCESS - 1) == 1
    if sys.platform == "linux" and len(os.sched_getaffinity(0)) > 1:
        import threading

        stop = threading.Event()
        t = threading.Thread(target=stop.wait)
        t.start()
        try:
            assert process_count(4, 10_000) == 1  # another thread: a fork would copy it
        finally:
            stop.set()
            t.join()


def test_drive_runs_a_coroutine_that_never_waits():
    async def ready():
        return 42

    async def waits():
        import asyncio

        await asyncio.sleep(0)

    assert drive(ready()) == 42
    with pytest.raises(RuntimeError, match="waited"):
        drive(waits())


def test_slim_records_cross_the_pipe_unchanged():
    from raglab.runner.workers import pack_records, unpack_records

    records = [
        {"case_id": "a", "tags": {"x": "1"}, "gold": {"answerable": True},
         "metrics": {"m1": 0.5, "m2": None, "latency_ms.total": 3.0}, "error": None,
         "diagnosis": {"primary": "retrieval", "causes": ["retrieval"]}},
        {"case_id": "b", "tags": {}, "gold": {"answerable": False},
         "metrics": {"m1": None, "m2": 1.0}, "error": "system: boom", "diagnosis": None},
        {"case_id": "c", "tags": {"x": "2"}, "gold": {"answerable": True},
         "metrics": {"m2": 2.0, "m1": 1.0}, "error": None, "diagnosis": None},
    ]
    names, rows = pack_records(records)
    assert len(names) == 3  # one list of names per distinct order
    back = unpack_records((names, rows))
    assert back == records and [list(r["metrics"]) for r in back] == [
        list(r["metrics"]) for r in records]


def test_load_takes_in_the_part_files_a_stopped_run_left(tmp_path, data):
    run = tmp_path / "run"
    assert run_cli(*_args(data, run, concurrency=1), cwd=REPO).returncode == 0
    lines = (run / "records.jsonl").read_bytes().splitlines(True)
    (run / "records.jsonl").write_bytes(b"".join(lines[:100]))
    (run / "records.part-1.jsonl").write_bytes(b"".join(lines[100:300]) + lines[300][:50])
    (run / "records.part-2.jsonl").write_bytes(b"".join(lines[299:400]))  # 299 twice
    kept = RecordWriter(run / "records.jsonl").load()
    assert [r.case_id for r in kept] == [json.loads(x)["case_id"] for x in lines[:400]]
    assert part_files(run) == []
    assert len((run / "records.jsonl").read_bytes().splitlines()) == 400


def test_an_append_stopped_in_the_middle_leaves_no_half_copied_part(tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM while a part is appended (the kernel copies it in pieces): the
    piece copied is cut off again, and the part, appended later, is there once."""
    main, part = tmp_path / "records.jsonl", tmp_path / "records.part-1.jsonl"
    main.write_bytes(b'{"case_id": "a"}\n')
    lines = b"".join(b'{"case_id": "p%d"}\n' % i for i in range(100))
    part.write_bytes(lines)
    real = os.copy_file_range

    def interrupted(src, dst, count, offset_src=None, *a):
        real(src, dst, 10, offset_src)
        raise KeyboardInterrupt

    writer = RecordWriter(main)
    monkeypatch.setattr(os, "copy_file_range", interrupted)
    with pytest.raises(KeyboardInterrupt):
        writer.absorb(part)
    assert main.read_bytes() == b'{"case_id": "a"}\n' and part.exists()
    monkeypatch.setattr(os, "copy_file_range", real)
    writer.absorb(part)
    writer.close()  # its fsync makes them durable: then the part goes
    assert main.read_bytes() == b'{"case_id": "a"}\n' + lines
    assert not part.exists()


# -- whole runs ---------------------------------------------------------------------------
needs_two_cpus = pytest.mark.skipif(
    sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2, reason="one CPU: no worker")


@needs_two_cpus
def test_two_processes_write_what_one_writes(tmp_path, data):
    one, two = tmp_path / "one", tmp_path / "two"
    assert run_cli(*_args(data, one, concurrency=1), cwd=REPO).returncode == 0
    p = run_cli(*_args(data, two, concurrency=2, progress="plain"), cwd=REPO)
    assert p.returncode == 0, p.stderr
    # the workers' cases count in the progress lines: the last says all, once
    counts = [line for line in p.stderr.splitlines() if line.startswith("cases ")]
    assert counts[-1] == f"cases {N_CASES}/{N_CASES} (0 with errors)"
    assert counts.count(counts[-1]) == 1
    m1 = json.loads((one / "metrics.json").read_text())
    m2 = json.loads((two / "metrics.json").read_text())
    assert (m1["processes"], m2["processes"]) == (1, 2)
    assert _stable(m1) == _stable(m2)
    for key in ("n_cases", "errors", "diagnoses", "work", "warnings"):
        assert m1[key] == m2[key], key
    assert _records(one) == _records(two)  # the same records, in the same order
    assert part_files(two) == []


def _run_checked_after(data: dict[str, Path], run_dir: Path, before: str,
                       setup: str = "") -> subprocess.CompletedProcess:
    """The two-process replay run in ``run_dir``, with ``before`` (Python lines, which see
    ``self`` and ``workers``) run just before the run's process checks the file's parts
    (``Run._check_workers``); ``setup`` runs first, with ``raglab.runner.run`` as ``rr``."""
    import textwrap

    probe = "\n".join([
        "import os, signal, sys, time",
        "import raglab.runner.run as rr",
        setup,
        "check = rr.Run._check_workers",
        "def patched(self, system, workers, *a, **k):",
        textwrap.indent(before, "    "),
        "    return check(self, system, workers, *a, **k)",
        "rr.Run._check_workers = patched",
        "import raglab.cli",
        "sys.argv = ['raglab', *sys.argv[1:]]",
        "raglab.cli.main()", ""])
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    return subprocess.run([sys.executable, "-c", probe, *_args(data, run_dir)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)


@needs_two_cpus
def test_cases_scored_before_the_checks_are_written_after_them_in_order(tmp_path, data):
    """The cases each process scores while the file's parts are still being checked are
    held in memory, and written in case order once the checks pass: with a worker held
    far longer than its buffer allows, and the run's process held until the worker has
    read its part, the records are one process's."""
    one, two = tmp_path / "one", tmp_path / "two"
    assert run_cli(*_args(data, one, concurrency=1), cwd=REPO).returncode == 0
    p = _run_checked_after(data, two, setup="rr.AHEAD_BYTES = 20_000  # a few records each",
                           before=("assert not (self.run_dir / 'records.part-1.jsonl').exists()\n"
                                   "time.sleep(1.0)  # the worker scores ahead, to its bound\n"
                                   "assert not (self.run_dir / 'records.part-1.jsonl').exists()"))
    assert p.returncode == 0, p.stderr
    assert json.loads((two / "metrics.json").read_text())["processes"] == 2
    assert _records(one) == _records(two)
    assert _stable(json.loads((one / "metrics.json").read_text())) == _stable(
        json.loads((two / "metrics.json").read_text()))


@needs_two_cpus
@pytest.mark.parametrize("content", ["", "one line"])
def test_a_file_of_one_part_is_checked_as_a_whole_file(tmp_path, data, content):
    """A file that gives one part (empty, one line) with concurrency=2: no worker, and
    the checks of a file read whole (an empty file refused; outputs for cases not in the
    set counted in a warning), as with concurrency=1."""
    path = tmp_path / "outputs.jsonl"
    path.write_text(json.dumps({"case_id": "not-in-the-set"}) + "\n" if content else "",
                    encoding="utf-8")
    runs = {}
    for n in (1, 2):
        run_dir = tmp_path / f"c{n}"
        p = run_cli(*_args(data, run_dir, path, concurrency=n), "max_error_rate=1", cwd=REPO)
        runs[n] = (p.returncode, p.stderr.strip().splitlines()[-1], run_dir)
    assert runs[1][0] == runs[2][0]
    if not content:
        assert runs[1][0] == 2 and "empty replay file" in runs[2][1]
        assert runs[1][1] == runs[2][1]
    else:
        warned = [json.loads((runs[n][2] / "metrics.json").read_text())["warnings"]
                  for n in (1, 2)]
        assert warned[0] == warned[1] and "not in the case set" in warned[1][0]


@needs_two_cpus
def test_a_worker_lost_after_reading_its_part_is_one_line_and_a_resume_finishes(tmp_path,
                                                                                 data):
    """A worker killed (by the kernel when memory ran out, say) after it has read its part
    and while it scores ahead: one line, exit 2, nothing written by it; the same command
    again finishes the run, with one process's records."""
    one, two = tmp_path / "one", tmp_path / "two"
    assert run_cli(*_args(data, one, concurrency=1), cwd=REPO).returncode == 0
    p = _run_checked_after(data, two, before=(
        "while not all(w.wait_ready(0.01) for w in workers):\n"
        "    pass  # each has read its part\n"
        "for w in workers:\n"
        "    os.kill(w.pid, signal.SIGKILL)\n"
        "time.sleep(0.2)"))
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert "ended without its results (killed by signal 9)" in last, p.stderr
    assert "Traceback" not in p.stderr
    assert part_files(two) == []  # it wrote nothing: no record before "go"
    again = run_cli(*_args(data, two), cwd=REPO)
    assert again.returncode == 0, again.stderr
    assert _records(one) == _records(two)


@needs_two_cpus
def test_ctrl_c_while_the_parts_are_checked_writes_nothing(tmp_path, data):
    """Ctrl-C as the run's process checks the parts (both processes holding the cases
    they scored ahead): the run stops there (exit 130), with no record written, and the
    same command again finishes it."""
    run_dir = tmp_path / "run"
    p = _run_checked_after(data, run_dir, before="os.kill(os.getpid(), signal.SIGINT)")
    assert p.returncode == 130, p.stderr
    records = run_dir / "records.jsonl"
    assert not records.exists() or records.stat().st_size == 0
    assert part_files(run_dir) == []
    assert run_cli(*_args(data, run_dir), cwd=REPO).returncode == 0
    assert len(_records(run_dir)) == N_CASES


def _cid(row: str) -> str:
    return json.loads(row)["case_id"]


@needs_two_cpus
@pytest.mark.parametrize("problem", ["bad line", "repeated id", "bad value",
                                     "repeated id, then a bad line", "two repeated ids",
                                     "blank lines, then a bad line"])
def test_a_bad_file_gets_the_same_answer_from_two_processes(tmp_path, data, problem):
    rows = data["outputs"].read_text(encoding="utf-8").splitlines(True)
    at = len(rows) - 40  # in the second part
    if problem == "bad line":
        rows[at] = '{"case_id": "q-bad", "candidates": [{"doc_id": ""}]}\n'
    elif problem == "repeated id":
        rows[at] = rows[at].replace(_cid(rows[at]), _cid(rows[3]))
    elif problem == "repeated id, then a bad line":  # the first problem is named
        rows[at] = rows[at].replace(_cid(rows[at]), _cid(rows[3]))
        rows[at + 10] = "{not json\n"
    elif problem == "two repeated ids":  # of the first part, then within the second
        rows[at] = rows[at].replace(_cid(rows[at]), _cid(rows[3]))
        rows[at + 10] = rows[at + 10].replace(_cid(rows[at + 10]), _cid(rows[at - 5]))
    elif problem == "blank lines, then a bad line":  # the first part holds no JSON line
        rows = ["\n"] * len(rows) * 2 + ["{not json\n"]
        at = len(rows) - 1
    else:  # a NaN score: that case fails, the run goes on
        rows[at] = rows[at].replace('"score": 10.0', '"score": NaN', 1)
    path = tmp_path / "outputs.jsonl"
    path.write_text("".join(rows), encoding="utf-8")
    one = run_cli(*_args(data, tmp_path / "one", path, concurrency=1), cwd=REPO)
    two = run_cli(*_args(data, tmp_path / "two", path, concurrency=2), cwd=REPO)
    assert one.returncode == two.returncode
    if problem == "bad value":
        assert one.returncode == 0
        assert _records(tmp_path / "one") == _records(tmp_path / "two")
        errors = [r["error"] for r in _records(tmp_path / "two") if r["error"]]
        assert len(errors) == 1 and f"outputs.jsonl:{at + 1}: non-finite" in errors[0]
    else:
        assert one.returncode == 2
        assert one.stderr.strip().splitlines()[-1] == two.stderr.strip().splitlines()[-1]
        assert re.search(rf"outputs.jsonl:{at + 1}[ :]", two.stderr), two.stderr
        assert not (tmp_path / "two" / "records.jsonl").exists() or not _records(
            tmp_path / "two")
        assert part_files(tmp_path / "two") == []


def _start(data, run_dir, big) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    return subprocess.Popen([sys.executable, "-m", "raglab.cli", *_args(big, run_dir)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def _when_both_write(run_dir: Path, proc: subprocess.Popen, timeout: float = 60) -> bool:
    """Wait until the run's process and a worker have both written records."""
    end = time.monotonic() + timeout
    part = run_dir / "records.part-1.jsonl"
    while time.monotonic() < end and proc.poll() is None:
        try:
            if part.stat().st_size > 0 and (run_dir / "records.jsonl").stat().st_size > 0:
                return True
        except FileNotFoundError:
            pass
        time.sleep(0.002)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> dict[str, Path]:
    """A set large enough to stop in the middle (a few seconds with two processes)."""
    return make(tmp_path_factory.mktemp("big"), 6000, depth=30, n_slices=5, n_docs=300)


def _workers_of(pid: int) -> list[int]:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(k) for k in kids]


@pytest.mark.slow
@pytest.mark.parametrize("concurrency", [1, 2])
def test_ctrl_c_in_a_terminal_stops_the_run_and_a_resume_finishes_it(tmp_path, big,
                                                                       concurrency):
    """A terminal's Ctrl-C reaches the run's whole process group (workers included): the
    run stops at once with exit 130, keeping what every process recorded."""
    if concurrency > 1 and (sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2):
        pytest.skip("one CPU: no worker")
    from tests.conftest import default_sigint

    run_dir = tmp_path / "run"
    args = _args(big, run_dir, concurrency=concurrency)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    proc = subprocess.Popen([sys.executable, "-m", "raglab.cli", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=default_sigint)
    end = time.monotonic() + 60
    while time.monotonic() < end and proc.poll() is None:
        if (run_dir / "records.jsonl").exists() and \
                (run_dir / "records.jsonl").stat().st_size > 0:
            break
        time.sleep(0.002)
    stopped_at = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    assert time.monotonic() - stopped_at < 3  # at once, not when its cases are done
    assert "interrupted; records kept" in err.decode()
    assert not (run_dir / "metrics.json").exists() and part_files(run_dir) == []
    done = len((run_dir / "records.jsonl").read_bytes().splitlines())
    assert 0 < done < 6000
    p = run_cli(*args, cwd=REPO)
    assert p.returncode == 0, p.stderr
    ids = [r["case_id"] for r in _records(run_dir)]
    assert len(ids) == len(set(ids)) == 6000


@needs_two_cpus
@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "worker killed"])
def test_a_stopped_run_resumes_without_losing_or_repeating_a_case(tmp_path, big, how):
    clean = tmp_path / "clean"
    assert run_cli(*_args(big, clean, concurrency=1), cwd=REPO).returncode == 0
    run_dir = tmp_path / "run"
    for attempt in range(5):  # the stop must land while both processes write
        proc = _start(big, run_dir, big)
        if _when_both_write(run_dir, proc):
            workers = _workers_of(proc.pid)
            if how == "worker killed":  # from outside (the kernel, out of memory)
                os.kill(workers[0], signal.SIGKILL)
            else:
                proc.send_signal(getattr(signal, how))
            _, err = proc.communicate(timeout=60)
            break
        proc.communicate(timeout=60)
        import shutil

        shutil.rmtree(run_dir)
    else:
        pytest.fail("the run ended before it could be stopped in the middle")
    assert not (run_dir / "metrics.json").exists()
    deadline = time.monotonic() + 10
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.01)  # a worker dies with its parent
    assert workers and not any(map(_alive, workers))
    if how != "SIGKILL":  # stopped cleanly: the worker's records were taken in
        assert part_files(run_dir) == []
    if how == "worker killed":
        assert proc.returncode == 2
        lines = err.decode().strip().splitlines()
        assert len(lines) == 1 and "worker process scoring part 2" in lines[0] \
            and "killed by signal 9" in lines[0] and "run the same command again" in lines[0]
    done_before = len((run_dir / "records.jsonl").read_bytes().splitlines()) + sum(
        len(p.read_bytes().splitlines()) for p in part_files(run_dir))
    assert 0 < done_before < 6000
    p = run_cli(*_args(big, run_dir), cwd=REPO)
    assert p.returncode == 0, p.stderr
    got, want = _records(run_dir), _records(clean)
    assert sorted(r["case_id"] for r in got) == sorted(r["case_id"] for r in want)
    assert sorted(got, key=lambda r: r["case_id"]) == sorted(want, key=lambda r: r["case_id"])
    m, mc = (json.loads((d / "metrics.json").read_text()) for d in (run_dir, clean))
    assert _stable(m) == _stable(mc)
    assert part_files(run_dir) == []
