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


def write_outputs(out: Path, files: dict[str, str]) -> list[Path]:
    """Each file under a temporary name, then renamed into place."""
    from raglab.data.io import atomic_write_text

    paths = []
    for name, text in files.items():  # JSON files come from json_text, scrubbed already
        atomic_write_text(out / name, text, scrubbed=name.endswith(".json"))
        paths.append(out / name)
    return paths
