"""Worker processes that score parts of a replay file beside the run's own process.

A replayed system without a grader is pure computation: reading the file and scoring each
case. With ``concurrency`` >= 2, more than one usable CPU and at least
``MIN_CASES_PER_PROCESS`` cases to score per process, the run splits the replay file into
parts at line starts (``ReplaySystem.parts``) and forks one worker per part after the first.
The run's own part is the smaller (:func:`first_share`): it also appends the workers'
records and aggregates every case. Each worker reads and checks its part while the run's
process reads the first; the checks across parts (a case id in two of them, an empty file)
are made before any record is written, so a bad file is refused exactly as when it is read
whole. Meanwhile each process scores the first cases of its part and holds their records
in memory (up to ``AHEAD_BYTES``); once the checks pass, each worker writes the records of
the cases whose outputs are in its part, in case order, to its own ``records.part-N.jsonl``
(flushed per record, as ``records.jsonl`` is); the run's process writes the rest to
``records.jsonl``, aggregates them while the workers end, and, as each worker finishes,
appends the worker's file to it and deletes it.

A worker is forked (it shares the loaded dataset), only from a process with no other thread,
and dies with the run's process (``PR_SET_PDEATHSIG``). It ignores Ctrl-C (a terminal sends
it to the whole process group): the run's process stops its workers and appends what they
recorded. A run killed in between (SIGKILL) leaves part files behind: the next run in the
directory takes their records in (``RecordWriter.load``), so a resume loses nothing that was
flushed and scores nothing twice.
"""

from __future__ import annotations

import mmap
import os
import signal
import struct
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from raglab.errors import UserError

#: a worker is worth its start (a fork, a message each way) from this many cases on
MIN_CASES_PER_PROCESS = 256
_PR_SET_PDEATHSIG = 1
#: the run's process, beside scoring its own part, appends the workers' records and
#: aggregates every case's metrics: about this fraction of the work of scoring the whole
#: file (measured on the replay benchmark, 2,000 x 100), taken off its part
FINISH_SHARE = 0.05
#: records scored before the whole file has been checked are held in memory, up to this
#: many bytes of them in each process (then it waits for the checks)
AHEAD_BYTES = 16 * 1024 * 1024


def process_count(concurrency: int, n_cases: int) -> int:
    """How many processes to score ``n_cases`` with: at most ``concurrency`` and the usable
    CPUs, one per ``MIN_CASES_PER_PROCESS`` cases; 1 where forking is not safe (another
    thread running, which a fork would copy mid-work) or not Linux."""
    if concurrency < 2 or n_cases < 2 * MIN_CASES_PER_PROCESS or sys.platform != "linux":
        return 1
    if threading.active_count() > 1:
        return 1
    cpus = len(os.sched_getaffinity(0))
    return max(1, min(concurrency, cpus, n_cases // MIN_CASES_PER_PROCESS))


def first_share(processes: int) -> float:
    """The share of the replay file for the run's own process when ``processes`` score it,
    so that all of them end at about the same time: with ``t`` = ``FINISH_SHARE``,
    ``share + t = (1 - share) / (processes - 1)``; never below half an even share."""
    if processes < 2:
        return 1.0
    return max((1 - FINISH_SHARE * (processes - 1)) / processes, 0.5 / processes)


class WorkerFailed(RuntimeError):
    """A worker failed with an error that is not the user's (its traceback follows)."""


class WorkerLost(UserError):
    """A worker ended without its results, killed from outside (by the kernel when memory
    ran out, say): one line, exit 2; what it flushed is kept, and a resume goes on."""

    exit_code = 2


class Worker:
    """One forked worker: ``target(worker)`` runs in the child, which talks to the parent
    with :meth:`send` and :meth:`recv` and reports its progress with :meth:`tick`."""

    #: the parent's ends of the connections of the workers alive (a new worker closes them)
    _parent_ends: list[Any] = []

    def __init__(self, index: int, target: Callable[[Worker], None]):
        from multiprocessing.connection import Pipe  # pickled messages over a socket pair

        self.index = index
        self._counts = mmap.mmap(-1, 16)  # shared with the child: cases done, with errors
        ours, theirs = Pipe()
        parent = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                ours.close()
                for end in Worker._parent_ends:  # the other workers' ends are not its own
                    end.close()
                Worker._parent_ends = []
                self._conn = theirs
                _die_with(parent)
                target(self)
            except BaseException as e:  # noqa: BLE001 (every end reports, then exits)
                code = 1
                try:
                    self.send(("failed", _described(e)))
                except BaseException:  # noqa: BLE001 (the parent is gone)
                    pass
            finally:
                os._exit(code)  # no atexit handler, no flush of the parent's buffers
        self.pid = pid
        theirs.close()
        self._conn = ours
        Worker._parent_ends.append(ours)
        self._seen = (0, 0)

    # -- both sides ----------------------------------------------------------------------
    def send(self, message: Any) -> None:
        self._conn.send(message)

    def recv(self) -> Any:
        return self._conn.recv()  # EOFError once the other side is gone

    # -- the worker's side ---------------------------------------------------------------
    def tick(self, error: bool) -> None:
        done, errors = struct.unpack_from("<qq", self._counts)
        struct.pack_into("<qq", self._counts, 0, done + 1, errors + bool(error))

    # -- the parent's side ---------------------------------------------------------------
    def result(self) -> Any:
        """The worker's next message; raises what the worker raised (a UserError as it
        was: a bad line of its part, a storage error), or WorkerFailed."""
        try:
            message = self.recv()
        except (EOFError, OSError):
            status = self.join()
            if status is not None and os.WIFSIGNALED(status) and \
                    os.WTERMSIG(status) in (signal.SIGINT, signal.SIGTERM):
                raise KeyboardInterrupt from None  # the run is being stopped
            raise WorkerLost(f"a worker process scoring part {self.index + 1} of the replay "
                             f"file ended without its results ({_ended(status)}); what it "
                             "recorded is kept: run the same command again to resume") \
                from None
        if message[0] == "failed":
            raise _rebuilt(message[1])
        return message

    def wait_ready(self, timeout: float) -> bool:
        """Whether a message is waiting (within ``timeout`` seconds)."""
        return self._conn.poll(timeout)

    def progress(self) -> tuple[int, int]:
        """Cases done and cases with errors since the last call."""
        done, errors = struct.unpack_from("<qq", self._counts)
        delta = (done - self._seen[0], errors - self._seen[1])
        self._seen = (done, errors)
        return delta

    def stop(self) -> None:
        """End the worker (SIGKILL: its flushed records stay) and reap it."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.join()

    def join(self) -> int | None:
        if not self.pid:
            return None
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            status = 0
        self.pid = 0
        if self._conn in Worker._parent_ends:
            Worker._parent_ends.remove(self._conn)
        self._conn.close()
        return status


def _ended(status: int | None) -> str:
    """How a reaped worker ended, for a message."""
    if status is None:
        return "already reaped"
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def pack_records(records: list[dict[str, Any]]) -> tuple[list[tuple], list[tuple]]:
    """Slim records (``raglab.runner.run.slim_record``) for the pipe: each record's metric
    names once per distinct list of them, its values as a tuple (a quarter of the bytes of
    pickled dicts, and four times faster to pickle and read)."""
    names: dict[tuple, int] = {}
    rows = []
    for r in records:
        m = r["metrics"]
        rows.append((r["case_id"], r["tags"], r["gold"]["answerable"],
                     names.setdefault(tuple(m), len(names)), tuple(m.values()), r["error"],
                     r["diagnosis"]))
    return list(names), rows


def unpack_records(packed: tuple[list[tuple], list[tuple]]) -> list[dict[str, Any]]:
    """The slim records :func:`pack_records` packed."""
    names, rows = packed
    return [{"case_id": cid, "tags": tags, "gold": {"answerable": answerable},
             "metrics": dict(zip(names[n], values)), "error": error, "diagnosis": diagnosis}
            for cid, tags, answerable, n, values, error, diagnosis in rows]


def part_path(run_dir: Path, index: int) -> Path:
    """Where worker ``index`` (1, 2, ...) writes its records."""
    return Path(run_dir) / f"records.part-{index}.jsonl"


def part_files(run_dir: Path) -> list[Path]:
    """The part files a stopped run left, in part order."""
    found = []
    for p in Path(run_dir).glob("records.part-*.jsonl"):
        n = p.name[len("records.part-"):-len(".jsonl")]
        if n.isdigit():
            found.append((int(n), p))
    return [p for _, p in sorted(found)]


def drive(coro: Any) -> Any:
    """Run a coroutine that never waits (a case of an inline system without a grader) to
    its end, without an event loop."""
    try:
        coro.send(None)
    except StopIteration as e:
        return e.value
    coro.close()
    raise RuntimeError("a case of an inline system waited for something")


def _die_with(parent: int) -> None:
    """In a worker: Ctrl-C is the parent's to handle (it stops its workers); SIGTERM ends
    the worker at once, and so does its parent's death."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it died before the line above
        os._exit(1)


def _described(e: BaseException) -> tuple:
    if isinstance(e, UserError):
        return ("user", type(e), e.message, e.file, e.line, e.case_id)
    return ("bug", "".join(traceback.format_exception(e)))


def _rebuilt(described: tuple) -> BaseException:
    if described[0] == "user":
        cls, message, file, line, case_id = described[1:]
        try:
            return cls(message, file=file, line=line, case_id=case_id)
        except TypeError:
            return UserError(message, file=file, line=line, case_id=case_id)
    return WorkerFailed("a worker process failed:\n" + described[1])
