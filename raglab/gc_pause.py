"""Keeping Python's cyclic garbage collector out of bulk work that makes no reference
cycles, where it finds nothing and only costs time: parsing a replay file (a few hundred
thousand dicts), MLflow's batches (as many ORM objects at once). (A run also leaves what
lives as long as it does out of the collector's walks, with ``gc.freeze``.)
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off for the block (nested or concurrent blocks share one pause;
    the collector comes back on after the last one only if it was on before the first)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
