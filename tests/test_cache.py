"""The stage cache under contention: a database that answers "locked" is waited for, the
file is set up by one thread, and a cache that stays locked is a StorageError (one line)."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from raglab import cache as cache_mod
from raglab.cache import StageCache
from raglab.errors import StorageError


class _Flaky:
    """A connection whose first ``fails`` statements answer 'database is locked'."""

    def __init__(self, conn, state):
        self._conn, self._state = conn, state

    def execute(self, sql, *args):
        with self._state["lock"]:
            self._state["seen"].append(sql.split()[0])
            if self._state["fails"] > 0:
                self._state["fails"] -= 1
                raise sqlite3.OperationalError("database is locked")
        return self._conn.execute(sql, *args)

    def close(self):
        self._conn.close()


def _patch(monkeypatch, fails):
    state = {"fails": fails, "seen": [], "lock": threading.Lock()}
    real = sqlite3.connect
    monkeypatch.setattr(cache_mod.sqlite3, "connect",
                        lambda *a, **k: _Flaky(real(*a, **k), state))
    monkeypatch.setattr(cache_mod.time, "sleep", lambda s: None)
    return state


def test_a_locked_answer_while_setting_up_is_retried(tmp_path, monkeypatch):
    state = _patch(monkeypatch, fails=2)  # the journal-mode pragma is refused twice
    c = StageCache(tmp_path / "cache")
    c.put("ns", "k", {"v": 1})
    assert c.get("ns", "k") == {"v": 1}
    assert state["seen"][:3] == ["PRAGMA", "PRAGMA", "PRAGMA"]


def test_a_cache_that_stays_locked_is_one_storage_error(tmp_path, monkeypatch):
    _patch(monkeypatch, fails=10**6)
    c = StageCache(tmp_path / "cache")
    with pytest.raises(StorageError, match="cannot write the stage cache"):
        c.get("ns", "k")


def test_threads_opening_a_fresh_cache_at_once_all_succeed(tmp_path):
    for trial in range(5):
        c = StageCache(tmp_path / f"cache{trial}")
        start = threading.Barrier(8)
        errors: list[str] = []

        def work(i, c=c, start=start, errors=errors):
            start.wait()
            try:
                for j in range(10):
                    assert c.get("ns", f"{i}-{j}") is None
                    c.put("ns", f"{i}-{j}", {"i": i, "j": j})
                    assert c.get("ns", f"{i}-{j}") == {"i": i, "j": j}
            except Exception as e:  # noqa: BLE001 - collected and asserted below
                errors.append(repr(e))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
