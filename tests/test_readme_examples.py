"""The README's "Extending raglab" examples, run exactly as written: its files are written
out from the code blocks (each names its path on its first line) and its command is run."""

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

from raglab import registry
from tests.conftest import REPO, TINY_CASES, TINY_CORPUS, write_jsonl

_BLOCK = re.compile(r"^```(?P<lang>\w+)\n(?P<body>.*?)^```$", re.S | re.M)


def _section() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return text.split("\n## Extending raglab\n", 1)[1].split("\n## ", 1)[0]


def _blocks() -> list[tuple[str, str]]:
    return [(m.group("lang"), m.group("body")) for m in _BLOCK.finditer(_section())]


def _write_files(root: Path) -> list[str]:
    written = []
    for lang, body in _blocks():
        first = body.splitlines()[0]
        if lang in ("python", "yaml") and first.startswith("# "):
            path = root / first[2:].strip()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
            written.append(first[2:].strip())
    return written


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


def test_the_readme_command_runs_with_both_examples(tmp_path, monkeypatch):
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
