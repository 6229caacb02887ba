"""``raglab init NAME --corpus FILE --cases FILE [--labels FILE]``: your dataset by its name.

Validates the files as ``raglab validate`` does and writes ``conf/dataset/NAME.yaml`` in the
working directory, whose ``conf/`` is on raglab's config search path: ``raglab run
dataset=NAME`` then runs on it, and the name reaches MLflow, reports and records."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from raglab.commands.common import fail

HELP = """usage: raglab init NAME --corpus FILE --cases FILE [--labels FILE] [--force]

Checks the corpus and the cases (schema, duplicate ids, every gold quote located in its
document, as raglab validate does) and writes conf/dataset/NAME.yaml in the working
directory. A conf/ folder in the working directory is on raglab's config search path, so
from this folder `raglab run dataset=NAME` (and `raglab validate dataset=NAME`) use it, and
MLflow, reports and records call the dataset NAME. Paths inside the working directory are
written relative to it (run raglab from here), others as absolute paths. An existing
conf/dataset/NAME.yaml is kept unless --force. Exit 0 when written, 1 when no case is
usable (nothing written), 2 for input that cannot be read (one line naming the file and line).
"""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse would print the usage too)
        fail(f"init: {message} (see raglab init --help)", 2)


def main(argv: list[str]) -> None:
    if any(a in ("-h", "--help") for a in argv):
        print(HELP)
        return
    p = _Parser(prog="raglab init", add_help=False)
    p.add_argument("name")
    p.add_argument("--corpus", required=True)
    p.add_argument("--cases", required=True)
    p.add_argument("--labels")
    p.add_argument("--force", action="store_true")
    args = p.parse_args(argv)
    from raglab.errors import UserError

    try:
        _init(args)
    except UserError as e:
        fail(str(e), 2)


def _init(args: argparse.Namespace) -> None:
    import yaml

    from raglab.data.dataset import is_shipped_set, load_dataset
    from raglab.data.io import atomic_write_text, check_readable_file
    from raglab.text.escape import term

    name = args.name
    if not _NAME.fullmatch(name) or name.endswith(".yaml"):
        fail(f"init: {name!r} is not a usable dataset name (letters, digits, '_', '-', '.'; "
             "at most 64 characters)", 2)
    if is_shipped_set(name):
        fail(f"init: {name!r} is the name of a dataset shipped with raglab; choose another", 2)
    out = Path("conf") / "dataset" / f"{name}.yaml"
    if out.exists() and not args.force:
        fail(f"init: {out} exists; keep it, or write it again with --force", 2)
    if out.exists() and not out.is_file():
        fail(f"init: {out} exists and is not a regular file", 2)
    paths = {k: getattr(args, k) for k in ("corpus", "cases", "labels")}
    for what, path in paths.items():
        if path is not None:
            check_readable_file(path, f"{what} file")
    ds = load_dataset(paths["corpus"], paths["cases"], paths["labels"])
    for w in ds.warnings:
        print(term(w), file=sys.stderr)
    for q in ds.quarantined:
        print(term(q.render()), file=sys.stderr)
    print(f"corpus: {paths['corpus']} ({len(ds.corpus)} documents)")
    print(f"cases:  {paths['cases']} ({ds.n_cases_total} cases, {len(ds.cases)} usable, "
          f"{len(ds.quarantined)} quarantined)")
    if paths["labels"]:
        print(f"labels: {paths['labels']} ({len(ds.labels)} human labels)")
    if not ds.usable or not ds.cases:
        fail(f"init: no usable case in {paths['cases']} (see the lines above); "
             f"{out} not written", 1)
    node = {"name": name, **{k: (_written(v) if v is not None else None)
                             for k, v in paths.items()}}
    text = (f"# The dataset {name!r}, written by raglab init (paths relative to the folder "
            "that holds conf/).\n# raglab run dataset=" + name + "\n"
            "defaults:\n  - /schema/dataset@_here_\n  - _self_\n"
            + yaml.safe_dump(node, sort_keys=False, allow_unicode=True))
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, text)
    print(f"wrote {out}: run it with `raglab run dataset={name}` from {Path.cwd()}"
          + (f" ({len(ds.quarantined)} quarantined case(s) are left out of runs: "
             f"raglab validate dataset={name})" if ds.quarantined else ""))


def _written(path: str) -> str:
    """A path relative to the working directory when inside it, else absolute."""
    p = Path(path).expanduser().resolve()
    try:
        return p.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(p)
