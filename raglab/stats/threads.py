"""How many BLAS threads raglab's statistics use: one.

The resampling engines are matrix products of a few thousand rows; numpy's BLAS would start
a thread per core for each, and on a shared machine (a CI runner, a second job on the other
core) those threads wait on each other: ``raglab compare`` of two demo runs took 36 s at a
load of 7 against 5.2 s with one thread. :func:`blas_threads` limits the BLAS pools of this
process for the duration of a block (threadpoolctl), and restores them after: only
raglab's own statistics are limited, never the code of a user that imports raglab.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

#: BLAS threads inside :func:`blas_threads` (None: leave the pools as they are)
BLAS_THREADS: int | None = 1


@contextmanager
def blas_threads() -> Iterator[None]:
    if BLAS_THREADS is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=BLAS_THREADS, user_api="blas"):
        yield
