"""On-disk, content-keyed stage cache shared by runs and sweep jobs.

- ``get``/``put``: JSON values in one SQLite file (WAL, safe across processes), by namespace
  and key; used for retrievals, generations and grader responses. Every value is scrubbed
  of known secrets before it is stored (:meth:`raglab.secrets.Scrubber.scrub_obj`), as
  everything raglab writes is; the caller computes the key from the unscrubbed content, so
  scrubbing never makes two different inputs share an entry.
- ``directory``: a folder per key for large artifacts (indexes), built under a file lock by
  one process while the others wait, and marked complete by a ``DONE`` file written last.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from raglab.errors import StorageError, storage_error


def content_key(*parts: Any, length: int | None = None) -> str:
    """The one content hash of raglab: SHA-256 of the parts' canonical JSON (hex), cut to
    ``length`` characters when given (metric versions, prompt and config hashes)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      default=str)
    digest = hashlib.sha256(blob.encode("utf-8")).hexdigest()
    return digest if length is None else digest[:length]


class StageCache:
    """A cache that cannot be read or written (disk full, I/O error, read-only, permissions)
    raises :class:`~raglab.errors.StorageError`, which stops the run with one line: it is
    never taken for one case's failure. Only results are stored, never errors."""

    def __init__(self, root: str | Path):
        self.root = Path(root).expanduser().resolve()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise storage_error(e, "the stage cache (cache_dir)", self.root) from None
        self._local = threading.local()
        self._setup_lock = threading.Lock()
        self._set_up = False

    def _fail(self, e: Exception) -> StorageError:
        return storage_error(e, "the stage cache (cache_dir)", self.root / "stages.sqlite")

    # -- key/value ---------------------------------------------------------------------
    def _db(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.root / "stages.sqlite", timeout=60, isolation_level=None)
            try:
                # the file's journal mode and table are set up once, by one thread: sqlite
                # answers "database is locked" at once, without waiting, to connections that
                # change the journal mode together
                with self._setup_lock:
                    if not self._set_up:
                        conn.execute("PRAGMA journal_mode=WAL")
                        conn.execute("CREATE TABLE IF NOT EXISTS kv (ns TEXT, key TEXT, "
                                     "value TEXT, PRIMARY KEY (ns, key))")
                        self._set_up = True
                conn.execute("PRAGMA synchronous=NORMAL")
            except BaseException:
                conn.close()  # set up again on the next try
                raise
            self._local.conn = conn
        return conn

    def _execute(self, sql: str, args: tuple) -> sqlite3.Cursor:
        """One statement; a database busy with another process's write is waited for (the
        connection's busy timeout, then a few bounded retries), any other failure is a
        StorageError."""
        for attempt in range(6):
            try:
                return self._db().execute(sql, args)
            except sqlite3.OperationalError as e:
                busy = "locked" in str(e) or "busy" in str(e)
                if not busy or attempt == 5:
                    raise self._fail(e) from None
                time.sleep(0.2 * (2 ** attempt))
            except (sqlite3.Error, OSError) as e:
                raise self._fail(e) from None
        raise AssertionError("unreachable")

    def get(self, ns: str, key: str) -> Any | None:
        row = self._execute("SELECT value FROM kv WHERE ns=? AND key=?", (ns, key)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, ns: str, key: str, value: Any) -> None:
        """Store ``value`` (JSON-like) under ``key``, its strings scrubbed of known secrets
        (an answer echoing a token is stored with ``***`` in its place)."""
        from raglab.secrets import SCRUBBER

        blob = json.dumps(value, ensure_ascii=False, allow_nan=False)
        if SCRUBBER.found_in_text(blob):  # string by string, never across JSON's syntax
            blob = json.dumps(SCRUBBER.scrub_obj(value), ensure_ascii=False, allow_nan=False)
        self._execute("INSERT OR REPLACE INTO kv (ns, key, value) VALUES (?, ?, ?)",
                      (ns, key, blob))

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- directories -------------------------------------------------------------------
    @contextlib.contextmanager
    def directory(self, ns: str, key: str) -> Iterator[tuple[Path, bool]]:
        """Yield ``(path, complete)`` holding an exclusive lock on the key.

        When ``complete`` is False the caller builds into ``path`` and the cache marks it
        complete on a clean exit; a failed build leaves it incomplete for the next try.
        """
        path = self.root / ns / key[:2] / key
        try:
            path.mkdir(parents=True, exist_ok=True)
            lock = open(path.parent / f"{key}.lock", "w")
        except OSError as e:
            raise self._fail(e) from None
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                done = (path / "DONE").exists()
                yield path, done
                if not done:
                    (path / "DONE").write_text("ok\n")
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
