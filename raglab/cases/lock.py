"""One review session per drafts file: an exclusive, non-blocking fcntl lock on a hidden
file beside it (``.DRAFTS.review.lock``), which holds the session's pid and host.

A second ``raglab cases review`` of the same drafts file exits with one line naming the
holder instead of rewriting the file under the first (each session would save its own
decisions over the other's). The lock is the kernel's: a session that dies, even by
SIGKILL, releases it, so a stale lock (its pid dead) is simply taken over. The file is
removed when the session ends; a session that finds it replaced under it tries again.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from raglab.errors import UserError, storage_error


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
        self._fd: int | None = None

    def acquire(self) -> ReviewLock:
        for _ in range(20):  # the file may be removed by the holder between open and lock
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError as e:
                raise storage_error(e, "the review lock", self.path) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise DraftsLocked(
                    f"{self.drafts}: another review session holds this {self.what} ("
                    + (holder or "pid unknown") + "); finish it first (q saves and quits)"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # removed (or replaced) by the session that just ended: again
                os.close(fd)
                continue
            try:  # the holder, for the message above (informative only)
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
            except OSError:
                pass
            self._fd = fd
            return self
        raise DraftsLocked(f"{self.drafts}: could not take the review lock {self.path}")

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            try:
                self.path.unlink()  # still held: no other session can hold this file
            except OSError:
                pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ReviewLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(fd: int) -> str | None:
    try:
        text = os.pread(fd, 300, 0).decode("utf-8", "replace").strip()
    except OSError:
        return None
    return text if text.startswith("pid ") and "\n" not in text else None
