"""Issue 10: fuzzing the input layer with hypothesis. Whatever the bytes, the loaders,
``validate``, the config layer and the replay/http output parsing end in raglab's own error
(one line), never a traceback, and never hold NaN, Infinity or a lone surrogate."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raglab.data.finite import NotFiniteError, check
from raglab.errors import ConfigError, UserError

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                    st.text(max_size=30), st.just("\ud800"), st.just(float("inf")),
                    st.just("x" * 5000), st.just("\x00\x1b[31m"))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20)
CASE_KEYS = ["id", "question", "answerable", "evidence", "nuggets", "tags", "filters",
             "user", "reference_answer", "must_not_contain", "extra"]
case_like = st.dictionaries(st.sampled_from(CASE_KEYS), json_values, max_size=8)
OUT_KEYS = ["case_id", "candidates", "context", "answer", "citations", "latency_ms", "usage"]
hit = st.fixed_dictionaries({"doc_id": st.text(max_size=5)},
                            optional={"score": scalars, "start": scalars, "end": scalars,
                                      "text": scalars})
output_like = st.one_of(
    st.dictionaries(st.sampled_from(OUT_KEYS), json_values, max_size=6),
    st.fixed_dictionaries({"case_id": st.just("c1"), "candidates": st.lists(hit, max_size=3)},
                          optional={"answer": scalars,
                                    "latency_ms": st.dictionaries(st.text(max_size=4), scalars,
                                                                  max_size=2)}))


def _line(obj) -> bytes:
    return json.dumps(obj, allow_nan=True, ensure_ascii=True).encode()


raw_lines = st.one_of(
    case_like.map(_line), json_values.map(_line), st.binary(max_size=200),
    st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(1, 3000).map(lambda n: b'{"id": "d", "question": "q", "tags": '
                             + b'{"a": ' * n + b"1" + b"}" * n + b"}"))


def _no_bad_values(obj) -> None:
    check(obj)  # raises NotFiniteError on NaN, Infinity or a lone surrogate


@SETTINGS
@given(lines=st.lists(raw_lines, min_size=1, max_size=4))
def test_loading_cases_never_raises_anything_but_a_user_error(tmp_path, lines):
    from raglab.data.dataset import load_cases

    p = tmp_path / "cases.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n")
    try:
        cases, _ = load_cases(p)
    except UserError as e:
        assert "\n" not in str(e)
        return
    for c in cases:
        _no_bad_values(c.model_dump())
        assert c.question.strip() and isinstance(c.answerable, bool)


@settings(SETTINGS, max_examples=20)
@given(lines=st.lists(raw_lines, min_size=1, max_size=3))
def test_validate_never_tracebacks(tmp_path, lines, capsys):
    from raglab.commands import validate
    from tests.conftest import TINY_CORPUS, write_jsonl

    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    p = tmp_path / "cases.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n")
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(SystemExit) as e:
            validate.main([f"dataset.corpus={corpus}", f"dataset.cases={p}",
                           "dataset.labels=null"])
            raise SystemExit(0)
    finally:
        os.chdir(cwd)
    assert e.value.code in (0, 1, 2)
    err = capsys.readouterr().err
    assert "Traceback" not in err


config_values = st.one_of(scalars, st.lists(scalars, max_size=3),
                          st.dictionaries(st.text(max_size=6), scalars, max_size=3))
CONFIG_KEYS = ["k", "candidate_depth", "concurrency", "context_token_budget", "cache_dir",
               "max_error_rate", "progress", "run_name", "metrics", "system", "chunker",
               "grader", "unknown_key"]


@SETTINGS
@given(changes=st.dictionaries(st.sampled_from(CONFIG_KEYS), config_values, max_size=3))
def test_the_config_layer_refuses_bad_values_with_one_line(changes):
    from raglab.config import parse_run_config

    base = _base_config()
    data = {**base, **changes}
    try:
        cfg = parse_run_config(data)
    except ConfigError as e:
        assert "\n" not in str(e)
        return
    assert isinstance(cfg.k, int) and not isinstance(cfg.k, bool)
    assert 0 <= cfg.max_error_rate <= 1


_BASE: dict | None = None


def _base_config() -> dict:
    global _BASE
    if _BASE is None:
        from raglab.commands.compose import compose_config

        _BASE = compose_config(["tracking=none"])
    return json.loads(json.dumps(_BASE))


@SETTINGS
@given(obj=output_like)
def test_replay_lines_fail_only_their_case_or_with_one_line(tmp_path, obj):
    from raglab.systems.base import SystemRequest
    from raglab.systems.replay import ReplaySystem

    p = tmp_path / "out.jsonl"
    p.write_bytes(_line(obj) + b"\n")
    cfg = SimpleNamespace(system=SimpleNamespace(path=str(p)))
    try:
        sut = ReplaySystem(cfg.system)
    except UserError as e:
        assert "\n" not in str(e)
        return
    for cid in list(sut.outputs) + list(sut.bad):
        try:
            out = sut.answer(SystemRequest(cid, "q", {}, None, {}))
        except ValueError as e:  # this case fails with the reason
            assert "non-finite" in str(e) or "surrogate" in str(e) or "nested" in str(e)
            continue
        _no_bad_values(dict(out) if isinstance(out, dict) else out.model_dump())


@SETTINGS
@given(body=st.one_of(output_like.map(_line), st.binary(max_size=100),
                      json_values.map(_line)))
def test_http_bodies_fail_the_case_with_an_http_system_error(body):
    from pydantic import ValidationError

    from raglab.data.finite import loads
    from raglab.systems.http import HttpSystem, HttpSystemError

    try:
        data = loads(body)
        out = HttpSystem._parse_data(data, "c1")
    except (NotFiniteError, ValueError, UnicodeDecodeError, HttpSystemError,
            ValidationError):
        return  # each is caught as that case's error by the runner
    _no_bad_values(out.model_dump())
    assert all(h.start is None or h.end is None or h.end >= h.start for h in out.candidates)


@SETTINGS
@given(value=json_values)
def test_finite_check_agrees_with_strict_json(value):
    try:
        check(value)
    except NotFiniteError:
        return
    text = json.dumps(value, allow_nan=False)  # would raise on NaN/Infinity
    text.encode("utf-8")  # would raise on a lone surrogate
    assert not any(isinstance(v, float) and not math.isfinite(v) for v in [value])
