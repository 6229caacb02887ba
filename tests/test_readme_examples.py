"""The examples of the README and the manual, run as written.

- The manual's plugin examples (docs/extending.md, "Extending raglab"): its files are
  written out from the code blocks (each names its path on its first line) and its command
  is run. Every other page's code block that names a file is at least compiled (Python) or
  parsed (YAML).
- The README's tour: its commands, in order, in an empty directory (on 30 demo cases
  without MLflow in the default run; exactly as written, on the whole demo with MLflow to
  ./mlflow.db, in the slow run).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from raglab import registry
from tests.conftest import REPO, TINY_CASES, TINY_CORPUS, write_jsonl

_BLOCK = re.compile(r"^```(?P<lang>\w+)\n(?P<body>.*?)^```$", re.S | re.M)
DOCS = REPO / "docs"


def _page_blocks(page: Path) -> list[tuple[str, str]]:
    return [(m.group("lang"), m.group("body")) for m in _BLOCK.finditer(page.read_text("utf-8"))]


def _section() -> str:
    return (DOCS / "extending.md").read_text(encoding="utf-8")


def _blocks() -> list[tuple[str, str]]:
    return [(m.group("lang"), m.group("body")) for m in _BLOCK.finditer(_section())]


def _named(blocks: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """``(lang, path, body)`` of the Python and YAML blocks whose first line names a file."""
    named = []
    for lang, body in blocks:
        first = body.splitlines()[0] if body.strip() else ""
        if lang in ("python", "yaml") and first.startswith("# ") and "." in first:
            named.append((lang, first[2:].strip(), body))
    return named


def _write_files(root: Path) -> list[str]:
    written = []
    for _, name, body in _named(_blocks()):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
        written.append(name)
    return written


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_every_named_file_of_the_manual_compiles_or_parses(page):
    for lang, name, body in _named(_page_blocks(DOCS / page)):
        if lang == "python":
            compile(body, f"{page}:{name}", "exec")
        else:
            assert isinstance(yaml.safe_load(body), dict), f"{page}: {name}"


def test_the_section_has_a_chunker_a_grader_and_a_command():
    langs = [lang for lang, _ in _blocks()]
    assert langs.count("python") == 2 and langs.count("yaml") == 2 and langs.count("bash") == 1


def test_the_paragraph_chunker(tmp_path, monkeypatch):
    _write_files(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry._ENTRIES, "chunker", dict(registry.entries("chunker")))
    mod = importlib.import_module("my_chunkers")
    text = "Short one.\n\nA second paragraph that is long enough.\n\n\nTail"
    chunks = mod.ParagraphChunker(mod.ParagraphChunkerCfg(name="paragraph", min_chars=20)) \
        .chunk("d", text)
    assert [c.text for c in chunks] == ["Short one.\n\nA second paragraph that is long enough.",
                                        "Tail"]
    assert all(text[c.start:c.end] == c.text for c in chunks)
    one_each = mod.ParagraphChunker(mod.ParagraphChunkerCfg(name="paragraph")).chunk("d", text)
    assert [c.text for c in one_each] == ["Short one.", "A second paragraph that is long enough.",
                                          "Tail"]
    sys.modules.pop("my_chunkers", None)


def test_the_extending_command_runs_with_both_examples(tmp_path, monkeypatch):
    written = _write_files(tmp_path)
    assert set(written) == {"my_chunkers.py", "my_grader.py", "my_conf/chunker/paragraph.yaml",
                            "my_conf/grader/phrase.yaml"}
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    [command] = [body for lang, body in _blocks() if lang == "bash"]
    command = command.replace("\\\n", " ").strip()
    assert " raglab run " in command
    command = command.replace(" raglab run ", f" {shlex.quote(sys.executable)} -m raglab.cli run ")
    out = tmp_path / "run"
    command += (f" dataset.corpus={corpus} dataset.cases={cases} dataset.labels=null"
                f" hydra.run.dir={out} cache_dir={tmp_path / 'cache'} progress=off")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = str(REPO)  # the raglab under test; the command adds its own folder
    proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    graded = [r for r in records if r["graded"]]
    assert graded and all(v["grader"] == "phrase" for r in graded for v in r["verdicts"])
    # the candidates are the paragraph chunker's chunks (min_chars: 40 from its YAML)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry._ENTRIES, "chunker", dict(registry.entries("chunker")))
    mod = importlib.import_module("my_chunkers")
    chunker = mod.ParagraphChunker(mod.ParagraphChunkerCfg(name="paragraph", min_chars=40))
    expected = {(d["doc_id"], c.start, c.end) for d in TINY_CORPUS
                for c in chunker.chunk(d["doc_id"], d["text"])}
    got = {(h["doc_id"], h["start"], h["end"]) for r in records
           for h in r["output"]["candidates"]}
    sys.modules.pop("my_chunkers", None)
    assert got and got <= expected
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["overall"]["candidate.evidence_recall"] == 1.0
    assert metrics["overall"]["faithfulness"] is not None
    cfg = (out / "config.yaml").read_text()
    assert "name: paragraph" in cfg and "name: phrase" in cfg


@pytest.mark.parametrize("group,name", [("chunker", "paragraph"), ("grader", "phrase")])
def test_the_examples_are_not_shipped_choices(group, name):
    assert name not in registry.choices(group)


# ---- the README's tour ----------------------------------------------------------------------

def _tour_commands() -> list[str]:
    """Every command of the README's tour, in order, continuation lines joined."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    tour = text.split("\n## A five-minute tour\n", 1)[1].split("\n## ", 1)[0]
    commands = []
    for lang, body in (m.group("lang", "body") for m in _BLOCK.finditer(tour)):
        if lang == "bash":
            commands += [c.strip() for c in body.replace("\\\n", " ").splitlines() if c.strip()]
    return commands


def test_the_tour_runs_validate_run_sweep_compare_decide_and_the_ui():
    verbs = [shlex.split(c)[:2] for c in _tour_commands()]
    assert verbs == [["raglab", "validate"], ["raglab", "run"], ["raglab", "run"],
                     ["raglab", "run"], ["raglab", "compare"], ["raglab", "compare"],
                     ["raglab", "plan"], ["raglab", "decide"], ["mlflow", "ui"]]


def _run_tour(root: Path, extra: list[str]) -> None:
    """Each raglab command of the tour in ``root``, ``extra`` appended to the Hydra
    overrides of validate and run; the mlflow ui command must point at the store the runs
    wrote."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = str(REPO)
    for command in _tour_commands():
        argv = shlex.split(command)
        if argv[0] == "mlflow":
            uri = argv[argv.index("--backend-store-uri") + 1]
            assert uri == "sqlite:///mlflow.db"
            if "tracking=none" not in extra:
                assert (root / "mlflow.db").is_file()
            continue
        assert argv[0] == "raglab", command
        argv = [sys.executable, "-m", "raglab.cli", *argv[1:]]
        if argv[3] in ("run", "validate"):
            argv += extra
        proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True,
                              timeout=900)
        # GO, NO-GO or INCONCLUSIVE: each a decision
        ok = (0, 1, 4) if argv[3] == "decide" else (0,)
        assert proc.returncode in ok, f"{command}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    assert (root / "runs/base/metrics.json").is_file()
    assert (root / "runs/compare-base-lexical/compare.json").is_file()
    assert list((root / "multirun/size_k").glob("compare-vs-*/compare.json"))
    assert list((root / "study").glob("decision-*-default.json"))


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_the_tour_commands_run(tmp_path, demo_subset):
    _run_tour(tmp_path, [*demo_subset, "tracking=none", "progress=off"])


@pytest.mark.slow
def test_the_tour_commands_run_exactly_as_written(tmp_path):
    _run_tour(tmp_path, [])
