"""The README is a front door, the manual (docs/) holds the rest: the README's length, every
relative link of both (file and anchor), and the tables the MkDocs hook generates
(docs_hooks/tables.py) from the component registry and the metric declarations."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from raglab import registry
from raglab.config import COMPONENT_GROUPS
from raglab.metrics.catalog import METRICS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
_FENCE = re.compile(r"^```.*?^```$", re.S | re.M)
_LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (?P<text>.+?)\s*$", re.M)


def _hook():
    spec = importlib.util.spec_from_file_location("docs_tables", ROOT / "docs_hooks" / "tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"[`*_]", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text("utf-8"))
    return {_slug(m.group("text")) for m in _HEADING.finditer(text)}


def _links(page: Path) -> list[str]:
    return [m.group("target") for m in _LINK.finditer(_FENCE.sub("", page.read_text("utf-8")))]


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines (at most 250)"


def test_the_readme_keeps_both_set_up_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert ("python3.11 -m venv .venv && . .venv/bin/activate && pip install -e . "
            "&& raglab run\n") in text
    test_command = ('python3.11 -m venv .venv && . .venv/bin/activate && pip install -e '
                    '".[test,oracle,dense,ray,openai,langchain,llamaindex,docs]" '
                    '&& python -m pytest && python -m pytest -m slow\n')
    assert test_command in text


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_every_relative_link_points_to_an_existing_file_and_anchor(page):
    links = _links(page)
    for target in links:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name}: {target} does not exist"
        if anchor and file.suffix == ".md":
            assert anchor in _anchors(file), f"{page.name}: {target}: no heading for #{anchor}"


def test_every_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in PAGES:
        assert f": {page.name}\n" in nav, page.name


def test_every_page_is_in_the_manual_home_table():
    """docs/index.md, the manual's home, lists every other page (it left out Judges and
    Drafting cases)."""
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    for page in PAGES:
        if page.name != "index.md":
            assert f"]({page.name})" in home, page.name


def test_the_config_choices_table_lists_every_choice_and_setting():
    table = _hook().config_choices_table()
    for group in COMPONENT_GROUPS:
        for name, entry in registry.entries(group).items():
            rows = [r for r in table.splitlines() if r.startswith(f"| `{group}` | `{name}` |")]
            assert rows, f"{group}={name} is not in the table"
            settings = {r.split(" | ")[2].strip("`") for r in rows}
            expected = {f.alias or key for key, f in entry.config.model_fields.items()
                        if key != "name"}
            assert settings == (expected or {"–"}), f"{group}={name}"


def test_the_config_table_shows_the_schema_defaults():
    rows = _hook().config_choices_table().splitlines()
    assert "| `embedder` | `bm25` | `k1` | `1.5` |" in rows
    assert "| `system` | `replay` | `path` | *required* |" in rows


def test_every_marker_of_the_manual_is_replaced():
    hook = _hook()
    seen = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        seen += re.findall(r"<!-- raglab:([\w-]+(?: [\w-]+)?) -->", text)
        assert "<!-- raglab:" not in hook.render(text), page.name
    assert "config-choices" in seen
    assert sorted(s.split()[1] for s in seen if s.startswith("metrics ")) == sorted(hook.SECTIONS)
    rendered = hook.render((DOCS / "metrics.md").read_text(encoding="utf-8"))
    assert all(name in rendered for name in METRICS)


def test_the_performance_page_has_no_placeholder_left():
    text = (DOCS / "performance.md").read_text(encoding="utf-8")
    assert "TBD" not in text
    assert "## Current figures" in text


@pytest.mark.skipif(shutil.which("mkdocs") is None and importlib.util.find_spec("mkdocs") is None,
                    reason="the docs extra is not installed (pip install -e '.[docs]')")
def test_the_manual_builds_strict(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={"NO_MKDOCS_2_WARNING": "1",
                                                        **__import__("os").environ})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "metrics" / "index.html").is_file()
