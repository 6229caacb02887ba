"""Every relative link and every path into this repository that the README, the manual
(docs/, its subfolders too) and examples/ give points at something that exists: Markdown
links `[text](path#anchor)` (the file; the manual's anchors are checked by tests/test_docs.py
and by `mkdocs build --strict`), and paths written out in text, code or comments, such as
`docs/ci.md` in the example workflow's comments. A path that holds a placeholder (capitals,
`*`) or names no file or folder (no extension, no trailing `/`, e.g. an output folder a
command writes) is not checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")
#: a path into the repository, written out (conf/ is left out: the manual's conf/ paths are
#: most often the user's own config folder)
_PATH = re.compile(r"(?<![\w./-])(?P<path>(?:docs|docs_hooks|examples|raglab|tests|experiments"
                   r"|\.ci)/[\w./-]*[\w/])")


def _texts() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    files += sorted(p for p in (ROOT / "examples").rglob("*")
                    if p.is_file() and p.suffix in (".md", ".yml", ".yaml", ".py", ".sh", ""))
    return files


def broken(file: Path, text: str) -> list[str]:
    """The relative links and repository paths of ``text`` (read from ``file``) that point
    at nothing."""
    out = []
    for m in _LINK.finditer(text):
        target = m.group("target")
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # http:, https:, mailto:, an anchor of the same page
        path = target.partition("#")[0]
        if not (file.parent / path).exists():
            out.append(f"link {target}")
    for m in _PATH.finditer(re.sub(r"\]\([^)\s]+\)", "]()", text)):  # links done above
        path = m.group("path")
        if re.search(r"[A-Z*]", path) or not (path.endswith("/") or re.search(r"\.\w+$", path)):
            continue
        if not (ROOT / path).exists():
            out.append(f"path {path}")
    return out


@pytest.mark.parametrize("text, found", [
    ("see docs/systems.md, system=replay", ["path docs/systems.md"]),
    ("[adapters](docs/adapters.md#replay) and docs/ci.md", []),
    ("[gone](docs/nope.md#x)", ["link docs/nope.md#x"]),
    ("raglab decide ... --study experiments/reranker", []),  # an output folder
    ("conf/gates/NAME.yaml and raglab/report/ and docs/*.md", []),
    ("the code in raglab/nothing/", ["path raglab/nothing/"]),
    ("[site](https://example.org/x.md) [top](#top)", []),
])
def test_the_check_finds_what_points_at_nothing(text, found):
    assert broken(ROOT / "README.md", text) == found


def test_every_relative_link_and_repository_path_exists():
    files = _texts()
    assert ROOT / "examples" / "ci" / "github-decide.yml" in files
    bad = [f"{f.relative_to(ROOT)}: {b}" for f in files
           for b in broken(f, f.read_text(encoding="utf-8"))]
    assert not bad, "\n".join(bad)
