"""Tracking URIs: normal form, printing, and the reachability check (no mlflow import).

``check_tracking`` runs before any work, so a wrong ``tracking.uri`` costs seconds, not a run.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from raglab.errors import UserError
from raglab.secrets import clip, clip_line

PROBE_TIMEOUT_S = 5.0
DB_SCHEMES = ("postgresql", "postgres", "mysql", "mssql", "oracle")

__all__ = ["check_tracking", "normalize_uri", "redact_uri", "sqlite_path", "ui_command",
           "scheme_of", "PROBE_TIMEOUT_S", "DB_SCHEMES"]


# ---- URIs ---------------------------------------------------------------------------
def scheme_of(uri: str) -> str:
    return uri.split(":", 1)[0].split("+", 1)[0].lower() if ":" in uri else ""


def sqlite_path(uri: str) -> Path | None:
    """The absolute database path of a ``sqlite:///`` URI (None for other URIs)."""
    if not uri.lower().startswith("sqlite:///"):
        return None
    raw = uri[len("sqlite:///"):].split("?", 1)[0]
    if raw in ("", ":memory:"):
        return None
    return Path(raw).expanduser().absolute() if not raw.startswith("/") else Path(raw)


def normalize_uri(uri: str) -> str:
    """Absolute form of a tracking URI (relative sqlite paths resolved against the cwd)."""
    uri = str(uri).strip()
    path = sqlite_path(uri)
    if path is not None:
        query = uri.split("?", 1)[1] if "?" in uri else ""
        return f"sqlite:///{path}" + (f"?{query}" if query else "")
    if scheme_of(uri) in ("http", "https"):
        return uri.rstrip("/")
    return uri


def redact_uri(uri: str) -> str:
    """The URI with any password replaced by ``***`` (safe to print or log)."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return uri
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))
    return uri


def ui_command(uri: str) -> str:
    """What a user types to browse the store.

    ``mlflow ui --backend-store-uri sqlite:////abs/path/mlflow.db`` for sqlite (absolute, so it
    works from any directory) and other database URIs (password shown as ``***``); for an
    http(s) tracking server, which has its own UI, the server's URL.
    """
    uri = normalize_uri(uri)
    if scheme_of(uri) in ("http", "https"):
        return uri
    return f"mlflow ui --backend-store-uri {shlex.quote(redact_uri(uri))}"


# ---- reachability (no mlflow import) -------------------------------------------------------
def _short_reason(exc: BaseException) -> str:
    text = str(exc)
    m = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", text)
    if m:
        return m.group(1).strip()
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return clip(first, 200)


def check_tracking(uri: str) -> None:
    """Fail fast with a one-line UserError when the tracking store cannot be used."""
    uri = normalize_uri(uri)
    shown = redact_uri(uri)
    scheme = scheme_of(uri)

    def unreachable(reason: str) -> UserError:
        from raglab.errors import NegativeOutcome

        reason = clip_line(reason, 300)
        # a service that is down, not a mistake in the command: exit 1
        return NegativeOutcome(f"MLflow tracking store unreachable at {shown}: {reason}")

    if scheme in ("http", "https"):
        import requests
        try:
            resp = requests.get(f"{uri}/health", timeout=PROBE_TIMEOUT_S)
        except requests.Timeout:
            raise unreachable(f"no answer within {PROBE_TIMEOUT_S:g} s") from None
        except requests.RequestException as exc:
            raise unreachable(_short_reason(exc)) from None
        if resp.status_code != 200:
            raise unreachable(f"GET /health returned HTTP {resp.status_code}")
    elif scheme == "sqlite":
        path = sqlite_path(uri)
        if path is None:
            raise unreachable("an in-memory sqlite store keeps nothing; give a file path")
        if not path.parent.is_dir():
            raise unreachable(f"directory {path.parent} does not exist")
        if path.exists():
            import sqlite3
            try:  # read-write (never creating): a store whose writer was killed keeps a
                # hot journal, which only a connection that can write rolls back, as
                # MLflow's own will
                conn = sqlite3.connect(path.as_uri() + "?mode=rw", uri=True,
                                       timeout=PROBE_TIMEOUT_S)
                try:
                    conn.execute("PRAGMA schema_version").fetchone()
                finally:
                    conn.close()
            except sqlite3.Error as exc:
                raise unreachable(f"{path}: {exc}") from None
    elif scheme in DB_SCHEMES:
        import sqlalchemy
        timeout = int(PROBE_TIMEOUT_S)
        args = {"connect_timeout": timeout} if scheme in ("postgresql", "postgres", "mysql") else {}
        try:
            engine = sqlalchemy.create_engine(uri, connect_args=args,
                                              poolclass=sqlalchemy.pool.NullPool)
            with engine.connect() as db:
                db.execute(sqlalchemy.text("SELECT 1"))
            engine.dispose()
        except ModuleNotFoundError as exc:
            hint = " (use postgresql+psycopg://)" if scheme.startswith("postgres") else ""
            raise unreachable(f"database driver missing: {exc.name}{hint}") from None
        except Exception as exc:  # noqa: BLE001 - any driver error means unusable
            raise unreachable(_short_reason(getattr(exc, "orig", None) or exc)) from None
    elif scheme in ("", "file"):
        if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("1", "true"):
            raise UserError(f"MLflow file store at {shown} is no longer supported by MLflow; "
                            "use tracking.uri=sqlite:///mlflow.db (or a server)")
