"""One process per run directory: an exclusive, non-blocking fcntl lock on ``.raglab.lock``.

A second ``raglab run`` in the same directory (a resume started while the first still runs,
or two sweep launchers given the same directory) exits with one line instead of interleaving
records and rewriting files under the first. The lock is the kernel's: a process that dies,
even by SIGKILL, releases it, so a resume never finds a stale lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from raglab.errors import UserError, storage_error

LOCK_FILE = ".raglab.lock"


class RunDirLocked(UserError):
    """Another process holds the run directory (exit 2)."""

    exit_code = 2


class RunDirLock:
    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> RunDirLock:
        if self._fd is not None:
            return self
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as e:
            raise storage_error(e, "the run directory", self.path.parent) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise RunDirLocked(
                "another raglab process" + (f" (pid {holder})" if holder else "")
                + " is running in this run directory; wait for it to end, or choose another "
                "hydra.run.dir", file=str(self.path.parent)) from None
        try:  # the holder's pid, for the message above (informative only)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None


def remove_unheld(run_dir: Path) -> None:
    """Remove the lock file of a run directory that holds nothing else, unless a process
    holds the lock (it is removed while held here, so no other process can take it)."""
    path = Path(run_dir) / LOCK_FILE
    if [p.name for p in Path(run_dir).iterdir()] != [LOCK_FILE]:
        return
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return
    try:
        path.unlink()
    finally:
        os.close(fd)


def _read_pid(fd: int) -> str | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return text if text.isdigit() else None
