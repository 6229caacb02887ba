"""What a system returns reaches records.jsonl only as valid, finite JSON: a NaN inside a
set, a record that cannot be serialised, huge or negative latencies and a number too long
for JSON readers each fail their case or are kept finite, never crash the run."""

from __future__ import annotations

import json

import pytest

from raglab.errors import UserError
from raglab.runner.run import Run
from tests.conftest import TINY_CASES
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


def test_huge_latencies_average_without_overflow(tmp_path):
    # the largest figure an output may report (1e308 is refused: test_bounds_settings.py)
    outs = [{"case_id": c["id"], "answer": "x", "candidates": [{"doc_id": "kb/a"}],
             "latency_ms": {"x": 1e12}} for c in TINY_CASES]
    (tmp_path / "out.jsonl").write_text("".join(json.dumps(o) + "\n" for o in outs))
    cfg, text = _cfg(tmp_path, "system=replay", f"system.path={tmp_path / 'out.jsonl'}")
    metrics = Run(cfg, tmp_path / "run", text).execute()
    assert metrics["overall"]["latency_ms.x"] == 1e12 and metrics["errors"] == 0
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
