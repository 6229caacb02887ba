"""Paths a reader of a decision record can follow: a local path is written relative to the
record only when both the path and the record are inside the project folder (the working
directory ``raglab decide`` ran in) and the path is not inside the installed package; any
other local path (a temporary folder, another checkout, the installed tool, another
machine's home) is left out: the record names that thing by its name and hash instead.
URIs (``pkg://``, ``mlflow://``, ...) are names, not paths, and stay as they are."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: what a record holds in place of a local path it cannot name portably
OUTSIDE = "(outside the project)"
_ABS = re.compile(r"^(/|~|[A-Za-z]:[\\/]|\\\\)")


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
    except ValueError:
        return False
    return True


def package_dir() -> Path:
    import raglab

    return Path(raglab.__file__).resolve().parent


def portable(path: Any, record_dir: Path, project: Path) -> str | None:
    """``path`` relative to ``record_dir`` when both are inside ``project`` and ``path`` is
    not inside the installed package; else None. URIs and None are returned as given."""
    if path is None or "://" in str(path):
        return None if path is None else str(path)
    p = Path(str(path)).expanduser()
    p = (p if p.is_absolute() else project / p).resolve()
    record_dir, project = record_dir.resolve(), project.resolve()
    pkg = package_dir()
    if not (_inside(p, project) and _inside(record_dir, project)) or (
            _inside(p, pkg) and not _inside(pkg, project)):
        return None
    return os.path.relpath(p, record_dir)


def shown(path: Any, paths: tuple[Path, Path] | None) -> str | None:
    """A run or sweep location as an output file shows it: with ``paths`` = (the folder the
    file is written to, the project folder), :func:`portable`, else ``(outside the
    project)/NAME``; without ``paths``, the path as given. URIs and run ids stay as given."""
    if path is None or paths is None or "://" in str(path) or not _ABS.match(str(path)) \
            and not Path(str(path)).exists():
        return None if path is None else str(path)
    rel = portable(path, paths[0], paths[1])
    return rel if rel is not None else f"{OUTSIDE}/{Path(str(path)).name}"


def scrub_paths(value: Any, record_dir: Path, project: Path) -> Any:
    """A run's config with each absolute local path made portable: relative to the record
    inside the project, else ``(outside the project)/NAME`` (the last part only)."""
    if isinstance(value, Mapping):
        return {k: scrub_paths(v, record_dir, project) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_paths(v, record_dir, project) for v in value]
    if isinstance(value, str) and _ABS.match(value) and "://" not in value:
        rel = portable(value, record_dir, project)
        return rel if rel is not None else f"{OUTSIDE}/{Path(value).name}"
    return value


def file_sha256(path: Any) -> str | None:
    import hashlib

    try:
        return hashlib.sha256(Path(str(path)).read_bytes()).hexdigest()
    except OSError:
        return None
