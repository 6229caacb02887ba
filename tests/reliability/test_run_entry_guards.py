"""Guards at a run's edges: an error page is scrubbed of secrets before it is cut, a plugin
cannot take a built-in component's name, and hydra.mode=MULTIRUN given as an override runs
Hydra's multirun."""

from __future__ import annotations

import sys

import pytest

from raglab.errors import ConfigError
from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl


def test_an_error_page_is_scrubbed_before_it_is_cut(monkeypatch):
    from raglab.secrets import SCRUBBER, clip

    secret = "SECRETVALUE1234567890"
    SCRUBBER.add([secret])
    text = "x" * 190 + secret + "y" * 50
    assert secret[:8] not in clip(text, 200)
    assert clip(text, 200).startswith("x" * 190 + "***")


def test_a_plugin_cannot_take_a_built_in_name(tmp_path, monkeypatch):
    from raglab import registry
    from raglab.commands.compose import compose_config
    from raglab.config import parse_run_config

    (tmp_path / "shadow_plugin.py").write_text(
        "from typing import Literal\n"
        "from raglab.data.schema import Strict\n"
        "from raglab.registry import register\n"
        "class C(Strict):\n    name: Literal['bm25']\n"
        "@register('embedder', 'bm25', config=C)\nclass Shadow:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = {g: dict(e) for g, e in registry._ENTRIES.items()}
    loaded = set(registry._LOADED)
    registry._ENTRIES["embedder"].pop("bm25", None)
    registry._LOADED.discard("embedder")
    sys.modules.pop("raglab.systems.index.bm25", None)
    try:
        data = compose_config(["+plugins=[shadow_plugin]"])
        with pytest.raises(ConfigError, match="registers embedder 'bm25', a name raglab"):
            parse_run_config(data)
    finally:
        for g, e in saved.items():
            registry._ENTRIES[g].clear()
            registry._ENTRIES[g].update(e)
        registry._LOADED.clear()
        registry._LOADED.update(loaded)
        sys.modules.pop("shadow_plugin", None)


def test_hydra_mode_multirun_as_an_override_runs_hydras_multirun(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    proc = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                   "dataset.labels=null", "grader=none", "tracking=none", "progress=off",
                   f"hydra.sweep.dir={tmp_path / 'sw'}", f"cache_dir={tmp_path / 'c'}",
                   "hydra.mode=MULTIRUN", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "sw" / "0" / "metrics.json").is_file()
