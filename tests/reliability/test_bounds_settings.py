"""Issue 24, defect 8: settings without bounds. A resample count or a YAML file that would
take gigabytes or never finish is refused at once, with one line (real CLI runs)."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl
from tests.reliability.harden import BASE, make_runs, one_line


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("runs"))


def _bomb(levels: int = 9) -> str:
    """A "billion laughs" document: 9 levels of 9 aliases each stand for 9^9 strings."""
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for name in "bcdefghij"[:levels - 1]:
        text += f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]\n"
        prev = name
    return text


def test_compare_refuses_a_huge_n_bootstrap(runs):
    base, cand = runs
    start = time.monotonic()
    proc = run_cli("compare", str(base), str(cand), "--set", "n_bootstrap=100000000",
                   cwd=base.parent, timeout=60)
    assert "n_bootstrap" in one_line(proc) and "100000" in proc.stderr
    assert time.monotonic() - start < 30


def test_calibrate_refuses_huge_resamples_and_a_negative_seed(tmp_path):
    for arg, word in (("resamples=100000000", "resamples"), ("seed=-1", "seed"),
                      ("seed=99999999999", "seed"), ("resamples=5", "resamples")):
        proc = run_cli("calibrate", arg, "tracking=none", cwd=tmp_path, timeout=60)
        assert word in one_line(proc), arg
    assert not (tmp_path / "outputs").exists()


def test_a_gates_file_of_aliases_is_refused_naming_the_file(runs, tmp_path):
    base, cand = runs
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_bomb() + "gates: []\n")
    selfref = tmp_path / "self.yaml"
    selfref.write_text("a: &a [*a]\ngates: []\n")
    deep = tmp_path / "deep.yaml"
    deep.write_text("gates: " + "[" * 1000 + "]" * 1000 + "\n")
    text = tmp_path / "text.yaml"  # a string holding YAML is not parsed a second time
    text.write_text(json.dumps(_bomb()) + "\n")
    for path, why in ((bomb, "expand to more than"), (selfref, "contains it"),
                      (deep, "nested deeper"), (text, "must be a mapping")):
        start = time.monotonic()
        proc = run_cli("decide", str(base), str(cand), f"gates={path}", "--study",
                       str(tmp_path / "study"), cwd=tmp_path, timeout=60)
        line = one_line(proc)
        assert str(path) in line and why in line
        assert time.monotonic() - start < 30
    assert not (tmp_path / "study").exists()


def test_the_yaml_loader_measures_a_bomb_without_expanding_it():
    from raglab.data.yaml_io import MAX_NODES, load_yaml
    from raglab.errors import UserError

    start = time.monotonic()
    with pytest.raises(UserError, match="x.yaml: YAML refused: its aliases expand"):
        load_yaml(_bomb(), "x.yaml")
    assert time.monotonic() - start < 2
    # shared aliases within the bound load as usual; plain data only
    assert load_yaml(_bomb(3), "ok.yaml")["c"][0][0][0] == "lol"
    assert 9 ** 3 < MAX_NODES
    with pytest.raises(UserError, match="plain data only"):
        load_yaml("!!python/object/apply:os.system ['true']", "--set alpha")


def test_a_system_output_with_an_absurd_latency_is_refused(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    rows = [{"case_id": c["id"], "candidates": [{"doc_id": "kb/a"}],
             "context": [{"doc_id": "kb/a"}], "answer": "Five business days.",
             "latency_ms": {"total": 1e308}} for c in TINY_CASES]
    replay = write_jsonl(tmp_path / "replay.jsonl", rows)
    proc = run_cli("run", *BASE, "k=3", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                   "system=replay", f"system.path={replay}", f"hydra.run.dir={tmp_path}/r",
                   cwd=tmp_path, timeout=120)
    line = one_line(proc)
    assert f"{replay}:1 case t-1" in line and "latency_ms.total" in line


@pytest.mark.parametrize("setting", ["grader.repeats=1000000000", "candidate_depth=1000000000",
                                     "concurrency=1000000000"])
def test_run_counts_are_bounded(tmp_path, setting):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    proc = run_cli("run", *BASE, "k=3", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                   setting, f"hydra.run.dir={tmp_path}/r", cwd=tmp_path, timeout=60)
    assert setting.split("=")[0] in one_line(proc)
    assert not (tmp_path / "r").exists()


def test_adapter_and_model_settings_are_bounded(tmp_path):
    from pydantic import ValidationError

    from raglab.graders.claude import ClaudeGraderCfg
    from raglab.systems.generators import AnthropicGenCfg
    from raglab.systems.http import HttpSystemCfg

    # the same settings without the huge value are valid: each refusal is the bound's
    HttpSystemCfg(name="http", url="http://127.0.0.1:9")
    ClaudeGraderCfg(name="claude", model="m", prompts="p")
    AnthropicGenCfg(name="anthropic", model="m", refusal="r")
    for field in ("retries", "concurrency", "max_body_bytes", "read_timeout_s", "backoff_s"):
        with pytest.raises(ValidationError):
            HttpSystemCfg(name="http", url="http://127.0.0.1:9", **{field: 10 ** 12})
    base = {"name": "claude", "model": "m", "prompts": "p"}
    for field in ("concurrency", "max_retries", "max_tokens", "timeout_s"):
        with pytest.raises(ValidationError):
            ClaudeGraderCfg(**base, **{field: 10 ** 12})
    for field in ("max_retries", "max_tokens", "timeout_s"):
        with pytest.raises(ValidationError):
            AnthropicGenCfg(name="anthropic", model="m", refusal="r", **{field: 10 ** 12})
    # and from the command line: one line naming the setting, nothing started
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    proc = run_cli("run", *BASE, f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                   "system=http", "system.url=http://127.0.0.1:9", "system.retries=1000000",
                   f"hydra.run.dir={tmp_path}/r", cwd=tmp_path, timeout=60)
    assert "system.retries" in one_line(proc)
    assert not (tmp_path / "r").exists()
