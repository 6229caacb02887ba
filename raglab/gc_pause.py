"""Keeping Python's cyclic garbage collector out of bulk work.

A replay run holds every parsed output (a few hundred thousand dicts) for the whole run, and
each full collection walks all of them; MLflow's batches build as many ORM objects at once.
Neither makes reference cycles, so the collector finds nothing there and only costs time.
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


@contextmanager
def long_lived() -> Iterator[None]:
    """Everything alive when the block starts (a run's dataset, its replayed outputs) is left
    out of the collector's walks until it ends (``gc.freeze``); objects made inside the
    block are collected as usual."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
