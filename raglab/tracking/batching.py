"""Writing params, metrics and tags to MLflow in as few ``log_batch`` requests as its limits
allow.

The limits are MLflow's own per request (``mlflow.utils.validation``), enforced by every store,
sqlite included: at most 1,000 entities, of which at most 100 params and 100 tags.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

METRICS_PER_BATCH = 1000   # MLflow's per-request limit for metrics
PARAMS_PER_BATCH = 100     # MLflow's per-request limit for params (and for tags)
TAGS_PER_BATCH = 100
ENTITIES_PER_BATCH = 1000  # metrics + params + tags in one request


def batches(metrics: Sequence[Any] = (), params: Sequence[Any] = (),
            tags: Sequence[Any] = ()) -> Iterator[tuple[list, list, list]]:
    """``(metrics, params, tags)`` per request, in order, each within MLflow's limits: params
    and tags go in the first requests, metrics fill every request up to 1,000 entities."""
    m = p = t = 0
    while m < len(metrics) or p < len(params) or t < len(tags):
        ps = list(params[p:p + PARAMS_PER_BATCH])
        ts = list(tags[t:t + TAGS_PER_BATCH])
        room = min(METRICS_PER_BATCH, ENTITIES_PER_BATCH - len(ps) - len(ts))
        ms = list(metrics[m:m + room])
        m, p, t = m + len(ms), p + len(ps), t + len(ts)
        yield ms, ps, ts


def log_batches(client, run_id: str, metrics: Sequence[Any] = (), params: Sequence[Any] = (),
                tags: Sequence[Any] = ()) -> int:
    """Log MLflow ``Metric``/``Param``/``RunTag`` entities to a run, synchronously, in the
    fewest requests; returns the number of requests made."""
    n = 0
    for ms, ps, ts in batches(metrics, params, tags):
        # synchronous even when MLFLOW_ENABLE_ASYNC_LOGGING is set: a run ends only after
        # all of its data is stored
        client.log_batch(run_id, metrics=ms, params=ps, tags=ts, synchronous=True)
        n += 1
    return n
