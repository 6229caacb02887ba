"""Tracking runs in MLflow.

Only this package imports mlflow, and only inside functions of :mod:`.mlflow_store`, so
importing ``raglab.tracking`` stays cheap. The key rules live in :mod:`.keys` (pure).
"""

from __future__ import annotations

from typing import Any

from raglab.tracking.keys import (flatten_config, metric_key, parse_slice_key,
                                  slice_metric_key)

__all__ = ["metric_key", "slice_metric_key", "parse_slice_key", "flatten_config",
           "MlflowRun", "check_tracking", "log_run_dir", "ui_command"]

_LAZY = {"MlflowRun", "check_tracking", "log_run_dir", "ui_command"}


def __getattr__(name: str) -> Any:  # PEP 562: the store module is loaded on first use
    if name in _LAZY:
        from raglab.tracking import mlflow_store
        return getattr(mlflow_store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
