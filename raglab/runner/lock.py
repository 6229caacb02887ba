"""One process per run directory: an exclusive lock on ``.raglab.lock`` (raglab.data.lockfile).

A second ``raglab run`` in the same directory (a resume started while the first still runs,
or two sweep launchers given the same directory) exits with one line instead of interleaving
records and rewriting files under the first. A process that dies, even by SIGKILL, releases
the lock, so a resume never finds a stale one.
"""

from __future__ import annotations

from pathlib import Path

from raglab.data.lockfile import FileLock, LockHeld, remove_if_free
from raglab.errors import UserError

LOCK_FILE = ".raglab.lock"


class RunDirLocked(UserError):
    """Another process holds the run directory (exit 2)."""

    exit_code = 2


class RunDirLock:
    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK_FILE
        self._lock = FileLock(self.path, what="the run directory")

    def acquire(self) -> RunDirLock:
        try:
            self._lock.acquire()
        except LockHeld as e:
            raise RunDirLocked(
                "another raglab process" + (f" ({e.holder})" if e.holder else "")
                + " is running in this run directory; wait for it to end, or choose another "
                "hydra.run.dir", file=str(self.path.parent)) from None
        return self

    def release(self) -> None:
        self._lock.release()


def remove_unheld(run_dir: Path) -> None:
    """Remove the lock file of a run directory that holds nothing else, unless a process
    holds the lock."""
    if [p.name for p in Path(run_dir).iterdir()] == [LOCK_FILE]:
        remove_if_free(Path(run_dir) / LOCK_FILE)
