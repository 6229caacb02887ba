"""Run names over random configurations and paths: at most 60 characters, the same
configuration always the same name, two configurations that differ in a named setting never
the same name, and never a bare hash (a fingerprint always says what it stands for)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from raglab.runner.naming import MAX_NAME, job_name, run_name, sweep_name

_WORD = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=40)
_PATH = st.builds(lambda parts, ext: "/".join(parts) + ext,
                  st.lists(_WORD.filter(lambda w: w not in (".", "..")), min_size=1,
                           max_size=6),
                  st.sampled_from(["", ".jsonl", ".json", ".txt"]))
_URL = st.builds(lambda scheme, host, port, path, slash: f"{scheme}://{host}:{port}/{path}{slash}",
                 st.sampled_from(["http", "https"]), _WORD, st.integers(1, 65535), _WORD,
                 st.sampled_from(["", "/"]))
_KIND = st.sampled_from(["reference", "langchain", "llamaindex", "http", "python", "replay"])
#: the named settings a configuration may set: key -> values of its type
_SETTINGS = {"chunker.size": st.integers(1, 100_000), "k": st.integers(1, 500),
             "grader.model": _WORD, "generator.model": _WORD, "llm.base_url": _URL,
             "dataset.cases": _PATH, "temperature": st.floats(0, 2, allow_nan=False),
             "options.flag": st.booleans()}
#: a fingerprint, when there is one, says what it stands for
_TAIL = re.compile(r" \((\S+|\+\d+ more) #[0-9a-f]{6}\)$")


@st.composite
def configs(draw) -> tuple[dict, list[str]]:
    """A configuration with every setting of the schema, and the settings it names (those
    the user set)."""
    cfg: dict = {"system": {"name": draw(_KIND)}}
    if cfg["system"]["name"] == "replay":
        cfg["system"]["path"] = draw(_PATH)
    named = []
    for key, values in _SETTINGS.items():
        node = cfg
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = draw(values)
        if draw(st.booleans()):
            named.append(key)
    return cfg, named


def _get(cfg: dict, key: str):
    node = cfg
    for part in key.split("."):
        node = node[part]
    return node


def _name(drawn: tuple[dict, list[str]]) -> str:
    return run_name(*drawn)


@settings(max_examples=120, deadline=None)
@given(configs())
def test_a_name_is_short_stable_and_says_what_its_fingerprint_is(drawn):
    name = _name(drawn)
    assert 0 < len(name) <= MAX_NAME
    assert name == _name(drawn)  # the same configuration, the same name (a resumed run)
    assert "#" not in name or _TAIL.search(name), name
    kind = drawn[0]["system"]["name"]
    if kind != "reference":
        assert name.startswith(kind), name


@settings(max_examples=120, deadline=None)
@given(configs(), configs())
def test_two_configurations_never_share_a_name(one, two):
    def seen(drawn):
        cfg, named = drawn
        return ({k: _get(cfg, k) for k in named}, cfg["system"])

    if seen(one) != seen(two):
        assert _name(one) != _name(two)


@settings(max_examples=80, deadline=None)
@given(_PATH, _PATH)
def test_two_replayed_files_never_share_a_name(a, b):
    def name(path):
        return run_name({"system": {"name": "replay", "path": path}, "k": 3}, ["k"])

    assert len(name(a)) <= MAX_NAME and name(a).startswith("replay:")
    if a != b:
        assert name(a) != name(b)


@settings(max_examples=80, deadline=None)
@given(configs(), st.lists(st.sampled_from(["chunker.size", "k", "grader.model"]),
                           min_size=1, max_size=3, unique=True),
       st.lists(st.integers(1, 10**9), min_size=1, max_size=12))
def test_a_sweep_name_is_short_and_tells_sweeps_apart(drawn, keys, values):
    cfg, named = drawn
    vals = {k: [str(v) for v in values] for k in keys}
    fixed = [f"{k}=x" for k in named if k not in keys]
    name = sweep_name(keys, vals, cfg, fixed)
    assert len(name) <= MAX_NAME and "sweep" in name
    assert "#" not in name or _TAIL.search(name), name
    other = {k: [str(v + 1) for v in values] for k in keys}  # the same axes, other values
    assert sweep_name(keys, other, cfg, fixed) != name
    if fixed:  # the same axes and values, one other fixed setting
        changed = {**cfg, "zz": {"fixed": "other"}}
        assert sweep_name(keys, vals, changed, [*fixed, "zz.fixed=other"]) != name


@settings(max_examples=60, deadline=None)
@given(configs(), st.sampled_from(["concurrency", "progress", "cache_dir", "k"]),
       st.one_of(*(st.lists(v, min_size=2, max_size=2, unique=True)
                   for v in (st.integers(1, 64), _WORD))),
       st.sampled_from([None, "base"]))
def test_the_jobs_of_a_sweep_never_share_a_name(drawn, key, values, given):
    """Whatever key a sweep varies (one that only says how a run is recorded too), its jobs'
    names differ, with or without a given run name."""
    cfg, _ = drawn
    names = {job_name(given, {**cfg, key: v}, [key], {}, {}, [key]) for v in values}
    assert len(names) == 2 and all(len(n) <= MAX_NAME for n in names), names


@settings(max_examples=60, deadline=None)
@given(_WORD, st.integers(1, 65535), _WORD,
       st.lists(st.tuples(st.sampled_from(["http", "https", "HTTP"]),
                          st.sampled_from(["", "/", "?", "#"])), min_size=2, max_size=2,
                unique=True))
def test_two_spellings_of_an_address_never_share_a_name(host, port, path, spellings):
    """http and https, a trailing "/", an empty query: each its own name."""
    names = {run_name({"llm": {"base_url": f"{scheme}://{host}:{port}/{path}{end}"}},
                      ["llm.base_url"]) for scheme, end in spellings}
    assert len(names) == 2 and all(len(n) <= MAX_NAME for n in names), names
