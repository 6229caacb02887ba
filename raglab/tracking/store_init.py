"""Opening a sqlite MLflow store so that no failure can break it for good.

MLflow creates a store's tables in many steps (its schema migrations); a full disk or a
kill between two of them used to leave a half-created ``mlflow.db`` on which every later
run failed (``table spans already exists``). So a new store is created under a temporary
name in the same directory and renamed into place once complete (a failure leaves nothing
behind), and a half-created store left by an older raglab or by MLflow itself is named in
one line that says how to recover. mlflow is imported inside the functions.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from pathlib import Path
from typing import Any

from raglab.errors import StorageError, UserError
from raglab.secrets import clip


class BrokenStoreError(UserError):
    """A sqlite MLflow store whose creation or upgrade was cut short (exit 2)."""

    exit_code = 2


def _reason(exc: BaseException) -> str:
    text = " ".join(str(getattr(exc, "orig", None) or exc).split())
    return clip(text.split("[SQL:")[0].strip(), 200) or type(exc).__name__


def _new_client(uri: str) -> Any:
    """An MlflowClient whose store is open (its tables created or upgraded)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    client.search_experiments(max_results=1)  # the store is made now, not at first use
    return client


def _dispose(client: Any) -> None:
    """Close the store's database connections (its file is about to be renamed)."""
    try:
        client._tracking_client.store.engine.dispose()
    except AttributeError:
        pass


def create_store(db: Path) -> None:
    """Create the store ``db`` in a temporary file beside it, then rename it into place.
    StorageError (one line) when that fails, with nothing left behind. Called under the
    store's lock: a temporary file of the store already there was left by a process
    killed while creating it, and is removed."""
    for stale in db.parent.glob(f".{db.name}.*.tmp*"):
        try:
            stale.unlink()
        except OSError:
            pass
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{db.name}.", suffix=".tmp", dir=db.parent)
        os.close(fd)
    except OSError as e:
        raise StorageError(f"cannot create the MLflow store: {e.strerror}", file=str(db)) \
            from None
    try:
        client = _new_client(f"sqlite:///{tmp}")
        _dispose(client)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, db)
    except Exception as e:  # noqa: BLE001 - sqlalchemy's and the OS's errors alike
        raise StorageError(f"cannot create the MLflow store ({_reason(e)}); nothing was "
                           "left behind: free some space and run again", file=str(db)) from None
    finally:
        for leftover in (tmp, tmp + "-journal"):
            try:
                os.unlink(leftover)
            except OSError:
                pass


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def broken(db: Path) -> BrokenStoreError:
    aside = f"{db}.broken"
    return BrokenStoreError(
        "a half-created MLflow store (its creation or upgrade was cut short, e.g. by a full "
        f"disk): move it aside with `mv {shlex.quote(str(db))} {shlex.quote(aside)}` and run "
        "again (a new store is created)", file=str(db))


def open_sqlite_store(db: Path, uri: str) -> Any:
    """An MlflowClient on the sqlite store ``db`` (``uri``), created whole when it does not
    exist yet; BrokenStoreError when it is half-created."""
    if not db.exists() or (db.is_file() and db.stat().st_size == 0):
        create_store(db)
    try:
        return _new_client(uri)
    except Exception as e:  # noqa: BLE001
        if "already exists" in str(e):  # a migration that ran half way before
            raise broken(db) from None
        raise
