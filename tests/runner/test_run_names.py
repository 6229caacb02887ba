"""Run names people can read: at most 60 characters, the system's kind first (``langchain``,
``replay:STEM``), then the settings that differ from the composed defaults, a URL without its
scheme and a file as its base name, a long value cut in the middle; two runs that differ in
any setting never share a name (a labelled fingerprint when the name shows less); a sweep's
own name says what it sweeps and what else it set."""

from __future__ import annotations

import re

import pytest

from raglab.commands.compose import compose_config, shipped_defaults
from raglab.runner.naming import MAX_NAME, job_name, run_name
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


def test_runs_differing_only_in_grader_base_url_differ_and_show_the_address():
    a = _name("grader=openai", "grader.model=qwen2.5-7b-instruct",
              "grader.base_url=http://127.0.0.1:8000/v1")
    b = _name("grader=openai", "grader.model=qwen2.5-7b-instruct",
              "grader.base_url=http://127.0.0.1:8001/v1")
    assert a != b and len(a) <= MAX_NAME and len(b) <= MAX_NAME
    # three long settings do not fit in 60 characters: the name says one more is left out
    assert "http://" not in a and re.search(r" \(\+1 more #[0-9a-f]{6}\)$", a)
    # the key spelt as far as no other setting (llm.base_url) shares it: no hash for that
    assert _name("grader=openai", "grader.base_url=http://judge.internal:8000/v1") == \
        "grader=openai grader.base_url=judge.internal:8000/v1"


def test_the_user_password_of_a_url_never_reaches_a_name():
    name = _name("grader=openai", "grader.base_url=http://alice:hunter2@judge:8000/v1")
    assert "hunter2" not in name and "alice" not in name and "=judge" in name


def test_long_command_lines_stay_within_60_characters_and_stay_apart():
    base = ["dataset.labels=null", "grader=openai", "generator=openai",
            "generator.model=qwen2.5-7b-instruct", "grader.model=qwen2.5-7b-instruct",
            "llm.base_url=http://localhost:8000/v1"]
    a, b = _name(*base, "k=3"), _name(*base, "k=4")
    assert len(a) <= MAX_NAME and len(b) <= MAX_NAME and a != b


def test_a_replay_is_named_by_its_file_and_two_folders_stay_apart(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = _name("system=replay", f"system.path={tmp_path / 'a' / 'out.jsonl'}")
    two = _name("system=replay", f"system.path={tmp_path / 'b' / 'out.jsonl'}")
    assert one.startswith("replay:out ") and str(tmp_path) not in one and one != two
    # the folder is told apart by a fingerprint that says what it stands for
    assert re.fullmatch(r"replay:out \(path #[0-9a-f]{6}\)", one)


def test_replayed_files_differing_at_the_end_stay_apart_and_say_so():
    """Before: the file name was cut at its end, so these two read the same up to a hash."""
    base = "/runs/outputs-2026-12-01-nightly-full-corpus-"
    one = _name("system=replay", f"system.path={base}baseline.jsonl", "k=3")
    two = _name("system=replay", f"system.path={base}candidate.jsonl", "k=3")
    assert one.startswith("replay:outputs-2026") and "baseline" in one
    assert "candidate" in two and one.split(" (")[0] != two.split(" (")[0]
    assert len(one) <= MAX_NAME and len(two) <= MAX_NAME and " k=3 " in one


@pytest.mark.parametrize(("kind", "extra"), [
    ("langchain", "system.factory=my_rag:build"),
    ("llamaindex", "system.factory=my_index:build"),
    ("http", "system.url=http://127.0.0.1:8000/rag"),
    ("python", "system._target_=my_module.make_system")])
def test_the_system_kind_starts_the_name(kind, extra):
    name = _name(f"system={kind}", extra, "k=3")
    assert name.split()[0] == kind and "k=3" in name and "system=" not in name


def test_the_reference_pipeline_stays_implicit():
    assert _name("system=reference", "k=3") == "k=3"


def test_two_settings_sharing_a_last_part_are_spelt_out_not_hashed():
    name = _name("grader=openai", "generator=openai", "grader.model=m1")
    assert name == "grader=openai generator=openai grader.model=m1"
    assert run_name({"grader": {"model": "m1"}, "generator": {"model": "m2"}},
                    ["grader.model", "generator.model"]) == "grader.model=m1 generator.model=m2"


@pytest.mark.parametrize("overrides", [
    ("k=3",), ("chunker.size=64", "k=3"), ("llm.base_url=http://127.0.0.1:8000/v1",),
    ("grader=openai", "grader.base_url=https://judge.example:8443/v1")])
def test_a_faithful_name_has_no_hash(overrides):
    assert "#" not in _name(*overrides)


def test_a_one_setting_name_never_ends_in_a_bare_hash():
    """Before: ``base_url=judge.internal:8000 #3fa2c1``, a hash with nothing to say why."""
    for cfg, keys in (({"llm": {"base_url": "http://judge.internal:8000/v1"}}, ["llm.base_url"]),
                      ({"dataset": {"cases": "/data/sets/cases30.jsonl"}}, ["dataset.cases"]),
                      ({"system": {"name": "replay", "path": "/data/out.jsonl"}}, []),
                      ({"x": "a-very-long-value-" * 3}, ["x"]), ({"x": 0.1 + 0.2}, ["x"])):
        name = run_name(cfg, keys)
        assert not re.search(r"(^| )#[0-9a-f]+$", name), name
        assert "#" not in name or re.search(r"\((path|cases|dataset|x|settings|\+\d+ more) "
                                            r"#[0-9a-f]{6}\)$", name), name


def test_a_sweep_job_names_every_swept_key_even_at_its_default():
    cfg = compose_config(["k=5"])
    defaults = redact(shipped_defaults())
    assert run_name(redact(cfg), ["k"], {}, defaults=defaults) == "defaults"
    assert run_name(redact(cfg), ["k"], {}, defaults=defaults, swept=True) == "k=5"


def test_a_given_run_name_in_a_sweep_is_followed_by_each_jobs_values():
    """Before: every job of ``run_name=tuned -m k=3,5`` was named ``tuned``."""
    cfg = {"k": 3, "chunker": {"size": 64}, "system": {"name": "langchain"}}
    assert job_name("tuned", cfg, ["k"], {}, {}, []) == "tuned"
    assert job_name("tuned", cfg, ["k"], {}, {}, ["k"]) == "tuned k=3"
    assert job_name(None, cfg, ["k"], {}, {}, ["k"]) == "langchain k=3"
    long = job_name("x" * 80, cfg, ["k", "chunker.size"], {}, {}, ["k", "chunker.size"])
    assert len(long) <= MAX_NAME and long.endswith(" k=3 size=64")


def test_a_compared_job_of_a_sweep_says_its_system(tmp_path):
    import yaml

    from raglab.compare.naming import job_label

    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump(
        {"hydra": {"overrides": {"task": ["k=3,5", "system=langchain"]}}}))
    for kind, want in (("langchain", "langchain k=3"), ("reference", "k=3")):
        job = tmp_path / kind
        job.mkdir()
        (job / "config.yaml").write_text(yaml.safe_dump(
            {"k": 3, "system": {"name": kind}}))
        assert job_label(job) == want


def test_a_sweep_is_named_by_its_kind_swept_values_and_other_settings():
    """Before: every sweep over k was ``k sweep``, whatever else it set or ran."""
    from raglab.runner.naming import override_values, sweep_name

    lc = {"system": {"name": "langchain", "factory": "m:b"}, "k": 3,
          "grader": {"name": "openai"}}
    assert sweep_name(["k"], {"k": [3, 5]}, lc, ["k=3", "grader=openai"],
                      {"grader": "openai"}) == "langchain sweep k=3,5 grader=openai"
    assert sweep_name(["k"], {"k": [3, 5]}, lc, ["k=3"]) == "langchain sweep k=3,5"
    # files swept: the kind alone (not the first job's file), each file by its name
    replay = {"system": {"name": "replay", "path": "/r/a/out-1.jsonl"}}
    name = sweep_name(["system.path"], {"system.path": ["/r/a/out-1.jsonl", "/r/b/out-2.jsonl"]},
                      replay)
    assert name.startswith("replay sweep path=out-1.jsonl,out-2.jsonl (values #")
    # the system swept: each job says its own kind, the sweep none
    assert sweep_name(["system"], {"system": ["reference", "http"]},
                      {"system": {"name": "reference"}}) == "sweep system=reference,http"
    # values as Hydra reads them (escapes undone), a URL without its scheme
    values = [override_values([o])["llm.base_url"]
              for o in ("llm.base_url=http\\://a\\:1/v1", "llm.base_url=http://b:2/v1")]
    assert sweep_name(["llm.base_url"], {"llm.base_url": values}) == \
        "sweep base_url=a:1/v1,b:2/v1"


def test_http_https_and_a_trailing_slash_give_three_names():
    """Before: all three were ``http url=h:8000/v1``, with no fingerprint."""
    names = [_name("system=http", f"system.url={url}")
             for url in ("http://h:8000/v1", "https://h:8000/v1", "http://h:8000/v1/")]
    assert names == ["http url=h:8000/v1", "http url=https://h:8000/v1",
                     "http url=h:8000/v1/"]
    # an https URL's scheme is not counted in the 24 characters a value may show
    assert _name("grader=openai", "grader.base_url=https://api.openai.com/v1") == \
        "grader=openai grader.base_url=https://api.openai.com/v1"
    # a URL that does not read back whole is fingerprinted: the scheme's spelling, a bare "?"
    for url in ("HTTP://h:8000/v1", "http://h:8000/v1?"):
        assert re.fullmatch(r"http url=h:8000/v1 \(url #[0-9a-f]{6}\)",
                            _name("system=http", f"system.url={url}")), url


def test_a_swept_bookkeeping_key_names_each_job():
    """Before: every job of ``-m concurrency=4,8`` was named ``python`` (or ``base
    defaults`` with ``run_name=base``), though concurrency changes the latency figures."""
    defaults = redact(shipped_defaults())
    jobs = []
    for value in ("4", "8"):
        cfg = redact(compose_config(["system=python", "system._target_=m.f",
                                     f"concurrency={value}"]))
        args = (cfg, ["concurrency"], {"system": "python"}, defaults, ["concurrency"])
        jobs.append((job_name(None, *args), job_name("base", *args)))
    assert jobs == [("python concurrency=4", "base concurrency=4"),
                    ("python concurrency=8", "base concurrency=8")]
    # outside a sweep it still says nothing of what the run measures
    assert _name("concurrency=8") == "defaults"
    # the sweep's table and tags read the same values
    from raglab.runner.naming import name_parts

    assert name_parts({"concurrency": 8}, ["concurrency"], swept=["concurrency"]) == \
        [("concurrency", "8")]


def test_a_given_name_is_not_followed_by_defaults():
    """Before: a sweep over a secret named every job ``base defaults``; the secret's value
    is never shown, and "defaults" was not true of the job."""
    cfg = {"llm": {"api_key": "***"}, "run_name": "base"}
    assert job_name("base", cfg, ["llm.api_key"], {}, {}, ["llm.api_key"]) == "base"
    # the name itself is never named, swept or not
    assert job_name(None, cfg, ["run_name"], {}, {}, ["run_name"]) == "defaults"
