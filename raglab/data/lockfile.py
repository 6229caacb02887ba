"""An exclusive, non-blocking fcntl lock on a file that names its holder.

Used for the things one process at a time may write: a run directory (``.raglab.lock``), a
drafts file under review. The lock is the kernel's: a process that dies, even by SIGKILL,
releases it, so a stale lock (its holder dead) is simply taken. The holder writes
``pid N on HOST`` into the file, read back only for the message of the one refused.

A lock file may be removed when its session ends (``remove_on_release``); a process that
opened it just before then finds the file replaced under it and opens it again.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from raglab.errors import storage_error


class LockHeld(Exception):
    """Another process holds the lock; ``holder`` is what it wrote (or None)."""

    def __init__(self, holder: str | None):
        super().__init__(holder or "holder unknown")
        self.holder = holder


class FileLock:
    def __init__(self, path: Path, *, what: str, remove_on_release: bool = False):
        self.path = Path(path)
        self.what = what  # for a storage error: "the run directory", "the review lock"
        self.remove_on_release = remove_on_release
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> FileLock:
        """Take the lock or raise LockHeld; a storage error is a UserError naming the file."""
        if self._fd is not None:
            return self
        for _ in range(20):  # the file may be removed by its holder between open and lock
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError as e:
                raise storage_error(e, self.what, self.path) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = read_holder(fd)
                os.close(fd)
                raise LockHeld(holder) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # removed (or replaced) by the session that just ended: again
                os.close(fd)
                continue
            try:  # the holder, for the message of the one refused (informative only)
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
            except OSError:
                pass
            self._fd = fd
            return self
        raise LockHeld(None)

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            if self.remove_on_release:
                try:
                    self.path.unlink()  # still held: no other process can hold this file
                except OSError:
                    pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None


def remove_if_free(path: Path) -> bool:
    """Remove a lock file nobody holds (taken while removed, so no one else can take it);
    False when a process holds it."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    try:
        path.unlink()
    finally:
        os.close(fd)
    return True


def read_holder(fd: int) -> str | None:
    try:
        text = os.pread(fd, 300, 0).decode("utf-8", "replace").strip()
    except OSError:
        return None
    return text if text.startswith("pid ") and "\n" not in text else None
