"""What every command shares: the shipped config folder, the one way a command fails and
the one way it writes its output files."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn


def conf_dir() -> Path:
    """The shipped configs: inside the installed package, or conf/ beside it in a checkout."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "conf", here.parent / "conf"):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise SystemExit("raglab: error: the shipped configs (conf/) are missing from the install")


def fail(message: str, code: int = 1) -> NoReturn:
    """Print one ``raglab: error: ...`` line (known secrets scrubbed) and exit with ``code``."""
    from raglab.secrets import scrub
    from raglab.text.escape import term

    print(f"raglab: error: {term(scrub(' '.join(str(message).split())))}", file=sys.stderr,
          flush=True)
    sys.exit(code)


COMPARE_FILES = ("compare.md", "compare.html", "compare.json")


def fresh_out(out: Path | None, default: Path) -> Path:
    """The folder a comparison is written to, never replacing one already written: an
    ``--out`` folder that holds a comparison is refused (exit 2); the default folder is
    numbered instead (``compare-A-B-2``, ...)."""
    from raglab.errors import UserError

    def taken(d: Path) -> bool:
        return any((d / n).exists() for n in COMPARE_FILES)

    if out is not None:
        out = out.resolve()
        if taken(out):
            raise UserError(f"--out {out}: already holds a comparison (compare.json); "
                            "choose another folder or remove that one first")
        return out
    default = default.resolve()
    folder, n = default, 1
    while taken(folder):
        n += 1
        folder = default.with_name(f"{default.name}-{n}")
    return folder


def write_outputs(out: Path, files: dict[str, str]) -> list[Path]:
    """Each file under a temporary name, then renamed into place."""
    from raglab.data.io import atomic_write_text

    paths = []
    for name, text in files.items():  # JSON files come from json_text, scrubbed already
        atomic_write_text(out / name, text, scrubbed=name.endswith(".json"))
        paths.append(out / name)
    return paths
