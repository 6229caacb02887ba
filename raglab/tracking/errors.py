"""The one line a run ends with when its tracking store fails after the run itself finished
(no mlflow import here, so the command can name it cheaply)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from raglab.errors import UserError
from raglab.secrets import clip_line


class TrackingError(UserError):
    """The tracking store failed; the run directory is complete (exit 1)."""

    exit_code = 1


def tracking_failed(exc: BaseException, run_dir: Path, cfg: Any) -> TrackingError:
    from raglab.tracking.uris import redact_uri

    uri = getattr(getattr(cfg, "tracking", None), "uri", None) or ""
    exp = getattr(getattr(cfg, "tracking", None), "experiment", None)
    reason = clip_line(exc, 300) or type(exc).__name__
    cmd = f"raglab log {shlex.quote(str(run_dir))}"
    if uri:
        cmd += f" --uri {shlex.quote(redact_uri(uri))}"
    if exp:
        cmd += f" --experiment {shlex.quote(str(exp))}"
    return TrackingError(
        f"MLflow failed while logging ({type(exc).__name__}: {reason}); the run directory "
        f"{run_dir} is complete, and `{cmd}` will finish the logging once the store is back")
