"""Issue 32 item 7: prices belong to models. A local model has an unknown cost (n/a, said
once), never another model's price; the grader and the generator on one local model run
without touching prices; one ``llm.base_url`` serves both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raglab.commands.compose import compose_config
from raglab.config import parse_run_config
from raglab.llm.client import cost_usd
from raglab.llm.prices import price_of, shipped
from raglab.runner.components import model_prices, unpriced_models
from tests.conftest import TINY_CASES, TINY_CORPUS, write_jsonl
from tests.graders.fake_anthropic import fake_model
from tests.llm.fake_openai import FakeOpenAI

LOCAL = "qwen2.5-7b-instruct"


def _cfg(*overrides: str):
    return parse_run_config(compose_config(list(overrides)))


def test_the_shipped_table_prices_the_models_the_configs_name_and_says_when_checked():
    table = shipped()
    assert table["checked"]
    for model in ("claude-sonnet-4-6", "gpt-4.1", "gpt-4.1-mini"):
        assert {"input", "output"} <= set(table["models"][model])
    assert model_prices(_cfg("grader=openai")) == {"gpt-4.1": table["models"]["gpt-4.1"]}


def test_a_model_priced_nowhere_has_no_price_never_another_models():
    cfg = _cfg("grader=openai", f"grader.model={LOCAL}")
    assert model_prices(cfg) == {} and unpriced_models(cfg) == [LOCAL]
    assert price_of(LOCAL) is None
    assert cost_usd({"input_tokens": 10}, model_prices(cfg).get(LOCAL), False) is None


def test_generator_and_grader_on_one_local_model_need_no_prices():
    cfg = _cfg("grader=openai", "generator=openai", f"grader.model={LOCAL}",
               f"generator.model={LOCAL}")
    assert model_prices(cfg) == {}
    # one price for the model, given once for both
    cfg = _cfg("grader=openai", "generator=openai", f"grader.model={LOCAL}",
               f"generator.model={LOCAL}", "+llm.prices={" + LOCAL + ": {input: 0, output: 0}}")
    assert model_prices(cfg) == {LOCAL: {"input": 0.0, "output": 0.0}}


def test_a_free_model_reads_its_cache_for_free():
    usage = {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 50}
    assert cost_usd(usage, {"input": 0, "output": 0}, False) == 0.0
    assert cost_usd(usage, {"input": 1.0, "output": 1.0}, False) is None  # still unknown


def test_own_prices_win_and_two_different_own_prices_are_refused():
    from raglab.errors import ConfigError

    cfg = _cfg("grader=openai", "+grader.prices={input: 1, output: 2}")
    assert model_prices(cfg) == {"gpt-4.1": {"input": 1.0, "output": 2.0}}
    cfg = _cfg("grader=openai", "generator=openai", "generator.model=gpt-4.1",
               "+grader.prices={input: 1, output: 2}", "+generator.prices={input: 3, output: 2}")
    with pytest.raises(ConfigError, match="differ for the same model"):
        model_prices(cfg)


def test_one_base_url_serves_grader_and_generator_unless_one_sets_its_own():
    cfg = _cfg("grader=openai", "generator=openai", "llm.base_url=http://127.0.0.1:9/v1",
               "grader.base_url=http://127.0.0.1:8/v1")
    assert cfg.generator.base_url == "http://127.0.0.1:9/v1"
    assert cfg.grader.base_url == "http://127.0.0.1:8/v1"


@pytest.mark.slow
def test_a_local_model_as_grader_and_generator_runs_with_cost_na(tmp_path):
    """Through the CLI: no price setting, one llm.base_url, no OPENAI_* variable; the run
    finishes, its cost is n/a (null), and the note is said once."""
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    out = tmp_path / "run"
    with FakeOpenAI(handler=fake_model) as srv:
        proc = subprocess.run(
            [sys.executable, "-m", "raglab.cli", "run", "grader=openai", "generator=openai",
             f"grader.model={LOCAL}", f"generator.model={LOCAL}",
             f"llm.base_url={srv.base_url}", f"dataset.corpus={corpus}",
             f"dataset.cases={cases}", "dataset.labels=null", "tracking=none",
             f"cache_dir={tmp_path / 'c'}", f"hydra.run.dir={out}", "progress=off"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert srv.calls("/v1/chat/completions")
    notes = [x for x in proc.stderr.splitlines() if "no price known" in x]
    assert len(notes) == 1 and LOCAL in notes[0], proc.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["overall"].get("cost_usd_per_query") is None
    usage = metrics.get("model_usage") or {}
    assert usage.get("cost_usd") is None, usage
    records = [json.loads(x) for x in Path(out / "records.jsonl").read_text().splitlines()]
    graded = [r for r in records if r.get("graded")]
    assert graded and all(r["grading_cost_usd"] is None for r in graded)  # unknown, not 0


def test_the_drafter_is_priced_and_served_as_runs_are():
    from raglab.cases.draft import parse_drafter
    from raglab.commands.cases_draft import _priced

    data = compose_config(["+drafter=openai", f"drafter.model={LOCAL}",
                           "llm.base_url=http://127.0.0.1:9/v1"])
    cfg = _priced(parse_drafter(data["drafter"]), data["llm"])
    assert cfg.prices == {} and cfg.base_url == "http://127.0.0.1:9/v1"
    data = compose_config(["+drafter=claude"])
    assert _priced(parse_drafter(data["drafter"]), data["llm"]).prices == \
        shipped()["models"]["claude-sonnet-4-6"]


@pytest.mark.slow
def test_drafting_with_a_local_model_estimates_no_cost_and_a_known_one_its_own(tmp_path):
    """``cases draft --dry-run`` prices a model as runs do: a local model's cost is n/a,
    never gpt-4.1's."""
    from tests.conftest import run_cli

    local = run_cli("cases", "draft", "n=2", "--dry-run", "drafter=openai",
                    f"drafter.model={LOCAL}", "llm.base_url=http://127.0.0.1:9/v1",
                    cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    assert f"cost n/a (no price known for {LOCAL}" in local.stdout
    known = run_cli("cases", "draft", "n=2", "--dry-run", "drafter=openai", cwd=tmp_path)
    assert known.returncode == 0, known.stderr
    assert "at most $" in known.stdout


def test_a_components_own_client_settings_price_its_model_from_the_table():
    """calibrate and monitor make their client from the grader's settings alone: the shipped
    model is priced from the table, a local one not at all."""
    from raglab import registry

    cfg = _cfg("grader=claude")
    settings = registry.entry("grader", "claude").factory.llm_settings(cfg.grader, cfg)
    assert settings["prices"] == {"claude-sonnet-4-6": shipped()["models"]["claude-sonnet-4-6"]}
    cfg = _cfg("grader=openai", f"grader.model={LOCAL}")
    assert registry.entry("grader", "openai").factory.llm_settings(cfg.grader, cfg)[
        "prices"] == {}
