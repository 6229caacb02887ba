"""MLflow traces, read for ``monitor`` and ``system=replay`` (``mlflow://EXPERIMENT``).

The traces of one experiment (an id, or a name) in a tracking store, page by page
(``MlflowClient.search_traces``, :data:`PAGE` traces a request, oldest first), each given
as plain data for :mod:`raglab.traces` to read: its id, its spans (ids, parent, name,
times in nanoseconds, attributes decoded: ``mlflow.spanType``, ``mlflow.spanInputs``,
``mlflow.spanOutputs``, ``mlflow.chat.tokenUsage``, ...), its tags, its metadata (user
and session), its request time and its feedback assessments. Nothing is kept between
pages: memory is bounded by a page.

Below the rest of :mod:`raglab.tracking` (tests/test_layers.py), so the trace readers can
use it; mlflow is imported when a store is read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from raglab.errors import UserError

PAGE = 100
SCHEME = "mlflow://"


def store_uri(configured: str | None) -> str:
    """The store to read: ``MLFLOW_TRACKING_URI`` when set, else the configured
    ``tracking.uri``, else ``sqlite:///mlflow.db``."""
    return os.environ.get("MLFLOW_TRACKING_URI") or configured or "sqlite:///mlflow.db"


def read_traces(source: str, uri: str) -> Iterator[dict[str, Any]]:
    """Each trace of the experiment ``source`` names (``mlflow://ID_OR_NAME``) as a dict:
    ``trace_id``, ``spans``, ``tags``, ``metadata``, ``request_time_ms``, ``assessments``."""
    experiment = source[len(SCHEME):] if source.startswith(SCHEME) else source
    if not experiment:
        raise UserError(f"{source}: name an experiment (mlflow://EXPERIMENT_ID or a name)")
    if uri.lower().startswith("sqlite:///"):
        db = uri[len("sqlite:///"):].split("?", 1)[0]
        if db not in ("", ":memory:") and not Path(db).expanduser().is_file():
            raise UserError(f"{source}: no MLflow store at {uri} (set tracking.uri or "
                            "MLFLOW_TRACKING_URI)")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import logging

    from mlflow.tracking import MlflowClient

    for name in ("mlflow.store.db.utils", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        client = MlflowClient(tracking_uri=uri)
        exp = None
        if experiment.isdigit():
            try:
                exp = client.get_experiment(experiment)
            except Exception:  # noqa: BLE001 - not an id of this store: try it as a name
                exp = None
        if exp is None:
            exp = client.get_experiment_by_name(experiment)
    except Exception as e:  # noqa: BLE001 - an unreachable or unreadable store
        raise UserError(f"{source}: cannot read the MLflow store {uri}: "
                        f"{type(e).__name__}: {e}") from None
    if exp is None:
        raise UserError(f"{source}: no experiment {experiment!r} in the MLflow store {uri}")
    token: str | None = None
    while True:
        try:
            page = client.search_traces(locations=[exp.experiment_id], max_results=PAGE,
                                        page_token=token, order_by=["timestamp_ms ASC"])
        except Exception as e:  # noqa: BLE001
            raise UserError(f"{source}: reading traces from {uri} failed: "
                            f"{type(e).__name__}: {e}") from None
        for t in page:
            yield _plain(t)
        token = page.token
        if not token:
            return


def _plain(t: Any) -> dict[str, Any]:
    info = t.info
    spans = [{"span_id": s.span_id or "", "parent_id": s.parent_id or "", "name": s.name,
              "start_ns": s.start_time_ns, "end_ns": s.end_time_ns,
              "attrs": dict(s.attributes or {})} for s in t.data.spans]
    assessments = []
    for a in getattr(info, "assessments", None) or ():
        fb = getattr(a, "feedback", None)
        if fb is not None:
            assessments.append({"name": a.name, "value": fb.value,
                                "source": getattr(a.source, "source_type", None),
                                "metadata": dict(getattr(a, "metadata", None) or {})})
    return {"trace_id": info.trace_id, "spans": spans, "tags": dict(info.tags or {}),
            "metadata": dict(info.trace_metadata or {}), "request_time_ms": info.request_time,
            "client_request_id": getattr(info, "client_request_id", None),
            "request_preview": getattr(info, "request_preview", None),
            "response_preview": getattr(info, "response_preview", None),
            "assessments": assessments}
