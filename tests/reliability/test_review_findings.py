"""Values that reached records.jsonl or crashed a run through paths the first checks missed:
each test failed before its fix."""

from __future__ import annotations

import json

import pytest

from raglab.errors import ConfigError, UserError
from raglab.runner.run import Run
from tests.conftest import TINY_CASES, run_cli, write_jsonl, TINY_CORPUS
from tests.reliability.test_units import _strict_load
from tests.runner.test_run_in_process import _cfg


def _python_system(tmp_path, monkeypatch, name: str, meta_expr: str):
    (tmp_path / f"{name}.py").write_text(
        "class S:\n"
        "    def answer(self, r):\n"
        f"        meta = ({meta_expr}) if r.case_id == 't-2' else {{}}\n"
        "        return {'case_id': r.case_id, 'answer': 'a',\n"
        "                'candidates': [{'doc_id': 'kb/a', 'metadata': meta}]}\n"
        "def make(opts):\n    return S()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return _cfg(tmp_path, "system=python", f"system._target_={name}.make")


@pytest.mark.parametrize("meta", ["{'a': {float('nan')}}", "{'a': frozenset([float('inf')])}"])
def test_a_nan_inside_a_set_fails_its_case_and_never_reaches_the_records(tmp_path,
                                                                          monkeypatch, meta):
    cfg, text = _python_system(tmp_path, monkeypatch, "set_sys", meta)
    metrics = Run(cfg, tmp_path / "run", text).execute()
    recs = [_strict_load(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert metrics["errors"] == 1
    assert "non-finite" in next(r for r in recs if r["case_id"] == "t-2")["error"]


def test_a_record_that_cannot_be_serialised_fails_its_case_with_the_case_sets_fields_only(
        tmp_path, monkeypatch):
    cfg, text = _python_system(tmp_path, monkeypatch, "obj_sys", "{'o': object()}")
    metrics = Run(cfg, tmp_path / "run", text).execute()
    recs = {r["case_id"]: r for r in map(_strict_load, (tmp_path / "run" / "records.jsonl")
                                         .read_text().splitlines())}
    assert metrics["errors"] == 1 and metrics["n_cases"] == 4
    bad = recs["t-2"]
    assert bad["error"].startswith("record: ") and bad["output"] is None
    assert not {"severity_one", "n_factual_sentences", "grading_cost_usd",
                "contradicted_claims"} & set(bad)


def test_an_error_page_is_scrubbed_before_it_is_cut(monkeypatch):
    from raglab.secrets import SCRUBBER, clip

    secret = "SECRETVALUE1234567890"
    SCRUBBER.add([secret])
    text = "x" * 190 + secret + "y" * 50
    assert secret[:8] not in clip(text, 200)
    assert clip(text, 200).startswith("x" * 190 + "***")


def test_huge_latencies_average_without_overflow(tmp_path):
    outs = [{"case_id": c["id"], "answer": "x", "candidates": [{"doc_id": "kb/a"}],
             "latency_ms": {"x": 1e308}} for c in TINY_CASES]
    (tmp_path / "out.jsonl").write_text("".join(json.dumps(o) + "\n" for o in outs))
    cfg, text = _cfg(tmp_path, "system=replay", f"system.path={tmp_path / 'out.jsonl'}")
    metrics = Run(cfg, tmp_path / "run", text).execute()
    assert metrics["overall"]["latency_ms.x"] == 1e308 and metrics["errors"] == 0
    _strict_load((tmp_path / "run" / "metrics.json").read_text())


def test_a_negative_latency_is_not_a_system_output(tmp_path):
    from types import SimpleNamespace

    from raglab.systems.replay import ReplaySystem

    outs = [{"case_id": c["id"], "latency_ms": {"x": 1.0}} for c in TINY_CASES]
    outs[3]["latency_ms"] = {"x": -5.0}
    (tmp_path / "out.jsonl").write_text("".join(json.dumps(o) + "\n" for o in outs))
    cfg = SimpleNamespace(system=SimpleNamespace(path=str(tmp_path / "out.jsonl")))
    with pytest.raises(UserError, match=r"out.jsonl:4 case t-4: field 'latency_ms.x'"):
        ReplaySystem(cfg.system)


def test_a_number_too_long_for_json_readers_is_one_line(tmp_path):
    outs = [{"case_id": c["id"], "answer": "x"} for c in TINY_CASES]
    lines = [json.dumps(o) for o in outs]
    lines[1] = lines[1][:-1] + ', "usage": {"n": ' + "9" * 5000 + "}}"
    (tmp_path / "out.jsonl").write_text("\n".join(lines) + "\n")
    from types import SimpleNamespace

    from raglab.systems.replay import ReplaySystem

    cfg = SimpleNamespace(system=SimpleNamespace(path=str(tmp_path / "out.jsonl")))
    with pytest.raises(UserError, match=r"out.jsonl:2.*number") as e:
        ReplaySystem(cfg.system)
    assert "\n" not in str(e.value)


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
    import sys
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
