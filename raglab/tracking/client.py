"""The one way raglab makes an MlflowClient (:func:`_client`), and the lock file parallel jobs
take turns under; below every other module of tracking."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from raglab.tracking.uris import DB_SCHEMES, scheme_of, sqlite_path

PARENT_FILE = ".mlflow_parent"
PARENT_LOCK = ".mlflow_parent.lock"
_READY: set[str] = set()  # sqlite stores initialised by this process


def _client(uri: str):
    """An MlflowClient; creating one creates/upgrades a database store's tables.

    Parallel jobs would race to do that: for sqlite they take turns under a lock file next to
    the database; for other databases a failed first attempt is retried once the winner is done.
    """
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # no usage reports
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # raglab prints its own
    from mlflow.tracking import MlflowClient

    for name in ("mlflow.store.db.utils", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    db = sqlite_path(uri)
    if db is not None and uri not in _READY:
        from raglab.tracking.store_init import open_sqlite_store

        with _locked(db.with_name(db.name + ".lock")):
            client = open_sqlite_store(db, uri)  # a new store is created whole, or not at all
        _READY.add(uri)
        return client
    for attempt in range(3):
        try:
            return MlflowClient(tracking_uri=uri)
        except Exception:  # noqa: BLE001 - e.g. another process is migrating the schema
            if attempt == 2 or scheme_of(uri) not in DB_SCHEMES:
                raise
            time.sleep(2.0 * (attempt + 1))
    raise AssertionError("unreachable")


class _locked:
    """An exclusive fcntl lock on ``path`` (no-op where fcntl does not exist)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        self.fh = open(self.path, "a+")
        try:
            import fcntl
            fcntl.flock(self.fh, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - Windows
            pass
        return self

    def __exit__(self, *exc):
        self.fh.close()  # closing releases the lock


