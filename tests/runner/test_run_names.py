"""Issue 32 item 6: run names people can read: at most 60 characters, from the settings that
differ from the composed defaults, a URL as its host and a file as its base name; two runs
that differ in any setting never share a name (a short hash when the name shows less)."""

from __future__ import annotations

import re

import pytest

from raglab.commands.compose import compose_config, shipped_defaults
from raglab.runner.naming import MAX_NAME, run_name
from raglab.secrets import redact


def _name(*overrides: str) -> str:
    """The name ``raglab run OVERRIDES`` gets (as commands/run.py builds it)."""
    cfg = compose_config(list(overrides))
    choices = {g: cfg[g]["name"] for g in ("grader", "generator", "system", "chunker")}
    choices["dataset"] = "demo"
    keys = [o.split("=", 1)[0] for o in overrides]
    return run_name(redact(cfg), keys, choices, defaults=redact(shipped_defaults()))


def test_plain_settings_read_as_before():
    assert _name("chunker.size=128", "k=3") == "size=128 k=3"
    assert _name() == "defaults"


def test_a_setting_at_its_default_is_not_named():
    assert _name("k=5") == "defaults"
    assert _name("k=5", "candidate_depth=20") == "candidate_depth=20"


def test_runs_differing_only_in_grader_base_url_differ_and_show_the_host():
    a = _name("grader=openai", "grader.model=qwen2.5-7b-instruct",
              "grader.base_url=http://127.0.0.1:8000/v1")
    b = _name("grader=openai", "grader.model=qwen2.5-7b-instruct",
              "grader.base_url=http://127.0.0.1:8001/v1")
    assert a != b and len(a) <= MAX_NAME and len(b) <= MAX_NAME
    assert "http://" not in a and re.search(r" #[0-9a-f]{6}$", a)
    short = _name("grader=openai", "grader.base_url=http://judge.internal:8000/v1")
    assert short.startswith("grader=openai base_url=judge.internal:8000 #")


def test_the_user_password_of_a_url_never_reaches_a_name():
    name = _name("grader=openai", "grader.base_url=http://alice:hunter2@judge:8000/v1")
    assert "hunter2" not in name and "alice" not in name and "judge:8000" in name


def test_long_command_lines_stay_within_60_characters_and_stay_apart():
    base = ["dataset.labels=null", "grader=openai", "generator=openai",
            "generator.model=qwen2.5-7b-instruct", "grader.model=qwen2.5-7b-instruct",
            "llm.base_url=http://localhost:8000/v1"]
    a, b = _name(*base, "k=3"), _name(*base, "k=4")
    assert len(a) <= MAX_NAME and len(b) <= MAX_NAME and a != b


def test_a_file_is_shown_by_its_base_name_and_two_folders_stay_apart(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = _name("system=replay", f"system.path={tmp_path / 'a' / 'out.jsonl'}")
    two = _name("system=replay", f"system.path={tmp_path / 'b' / 'out.jsonl'}")
    assert "path=out.jsonl" in one and str(tmp_path) not in one and one != two


@pytest.mark.parametrize("overrides", [("k=3",), ("chunker.size=64", "k=3")])
def test_a_faithful_name_has_no_hash(overrides):
    assert "#" not in _name(*overrides)


def test_a_sweep_job_names_every_swept_key_even_at_its_default():
    cfg = compose_config(["k=5"])
    defaults = redact(shipped_defaults())
    assert run_name(redact(cfg), ["k"], {}, defaults=defaults) == "defaults"
    assert run_name(redact(cfg), ["k"], {}, defaults=defaults, swept=True) == "k=5"
