"""One review session per drafts file: an exclusive lock (raglab.data.lockfile) on a hidden
file beside it (``.DRAFTS.review.lock``), removed when the session ends.

A second ``raglab cases review`` of the same drafts file exits with one line naming the
holder instead of rewriting the file under the first (each session would save its own
decisions over the other's). A session that dies, even by SIGKILL, releases the lock, so a
stale one is simply taken over.
"""

from __future__ import annotations

from pathlib import Path

from raglab.data.lockfile import FileLock, LockHeld
from raglab.errors import UserError


class DraftsLocked(UserError):
    """Another review session holds the drafts file (exit 2)."""

    exit_code = 2


def lock_path(drafts: Path) -> Path:
    return drafts.with_name(f".{drafts.name}.review.lock")


class ReviewLock:
    """``what`` names the file in the message (the drafts file; a labelling file)."""

    def __init__(self, drafts: Path, what: str = "drafts file"):
        self.drafts = drafts
        self.what = what
        self.path = lock_path(drafts)
        self._lock = FileLock(self.path, what="the review lock", remove_on_release=True)

    def acquire(self) -> ReviewLock:
        try:
            self._lock.acquire()
        except LockHeld as e:
            raise DraftsLocked(
                f"{self.drafts}: another review session holds this {self.what} ("
                + (e.holder or "pid unknown") + "); finish it first (q saves and quits)"
            ) from None
        return self

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> ReviewLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
