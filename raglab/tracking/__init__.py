"""Tracking runs in MLflow.

Only this package imports mlflow, and only inside functions (of :mod:`.store_setup`,
experiments and a sweep's parent run; :mod:`.mlflow_store`, logging a run; :mod:`.traces`,
each case of a run as a trace; and the modules beside them), so importing
``raglab.tracking`` stays cheap. The key rules live in :mod:`.keys`, tracking URIs and the
reachability check in :mod:`.uris` (both pure).
"""

from __future__ import annotations

from typing import Any

from raglab.tracking.keys import flatten_config, metric_key, parse_slice_key, slice_metric_key
from raglab.tracking.uris import check_tracking, normalize_uri, ui_command

__all__ = ["metric_key", "slice_metric_key", "parse_slice_key", "flatten_config",
           "check_tracking", "normalize_uri", "ui_command", "MlflowRun", "log_run_dir"]

_LAZY = {"MlflowRun", "log_run_dir"}


def __getattr__(name: str) -> Any:  # PEP 562: the store module is loaded on first use
    if name in _LAZY:
        from raglab.tracking import mlflow_store
        return getattr(mlflow_store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
