"""The MLflow key rules (pure functions, no mlflow needed except for the cross-check)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raglab.tracking.keys import (
    escape_segment,
    flatten_config,
    is_legal_key,
    metric_key,
    metrics_from_summary,
    parse_slice_key,
    slice_metric_key,
    unescape_segment,
)

HOSTILE = ["a/b", "a_s_b", "x__y", "é ü", "50%", "", ".", "..", "/", "//", "_", "__", "_s",
           "_e", "_d", "_x25", "a\nb", "tab\there", "😀", "@10", "k=v", "a,b(c)#d", " lead",
           "trail ", "C:\\path", "ümlaut/ß", "%2F", "a//b", "../x"]


@pytest.mark.parametrize("name,key", [
    ("candidate.ndcg@10", "candidate.ndcg_at_10"),
    ("final.evidence_recall@5", "final.evidence_recall_at_5"),
    ("final.mrr", "final.mrr"),
    ("latency_ms.generate", "latency_ms.generate"),
    ("work.grader_calls", "work.grader_calls"),
    ("a=b", "a_b"),
    ("x#1(2),3", "x_1_2__3"),
    ("ratio:1 / 2", "ratio:1 / 2"),
    ("é", "é"),
])
def test_metric_key(name, key):
    assert metric_key(name) == key
    assert is_legal_key(key)


@pytest.mark.parametrize("value", HOSTILE)
def test_slice_key_round_trips_hostile_values(value):
    key = slice_metric_key(value, value, "candidate.ndcg@10")
    assert is_legal_key(key), key
    assert key.startswith("slice/") and key.endswith("/candidate.ndcg_at_10")
    assert key.count("/") == 3
    assert parse_slice_key(key) == (value, value, "candidate.ndcg_at_10")


def test_readable_values_stay_readable():
    key = slice_metric_key("intent", "billing", "faithfulness")
    assert key == "slice/intent/billing/faithfulness"
    assert slice_metric_key("source", "a/b", "n") == "slice/source/a_sb/n"
    assert slice_metric_key("pct", "50%", "n") == "slice/pct/50_x25/n"
    assert slice_metric_key("x", "a_s_b", "n") == "slice/x/a__s__b/n"


def test_escapes_are_distinct():
    assert len({escape_segment(v) for v in HOSTILE}) == len(set(HOSTILE))


@pytest.mark.parametrize("bad", ["_", "_q", "_x2", "_xzz", "a/b", "_u12"])
def test_unescape_rejects_malformed(bad):
    with pytest.raises(ValueError):
        unescape_segment(bad)


@pytest.mark.parametrize("bad", ["final.mrr", "slice/a/b", "slices/a/b/c", "slice/a/b/"])
def test_parse_rejects_non_slice_keys(bad):
    with pytest.raises(ValueError):
        parse_slice_key(bad)


def test_metric_part_may_contain_slash():
    assert parse_slice_key("slice/k/v/latency/ms") == ("k", "v", "latency/ms")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30), st.text(max_size=30), st.text(min_size=1, max_size=20))
def test_round_trip_any_text(tag_key, tag_value, metric):
    key = slice_metric_key(tag_key, tag_value, metric)
    k, v, m = parse_slice_key(key)
    assert (k, v) == (tag_key, tag_value)
    assert m == metric_key(metric)
    assert "/" not in escape_segment(tag_key) and "/" not in escape_segment(tag_value)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=25), st.text(max_size=25))
def test_slice_keys_pass_mlflow_validation(tag_key, tag_value):
    validation = pytest.importorskip("mlflow.utils.validation")
    key = slice_metric_key(tag_key, tag_value, "final.ndcg@5")
    if len(key) <= 250:
        validation._validate_metric_name(key)  # raises MlflowException when illegal
        assert is_legal_key(key)


def test_is_legal_key_rules():
    assert not is_legal_key("")
    assert not is_legal_key("a//b")
    assert not is_legal_key("/a")
    assert not is_legal_key("a/")
    assert not is_legal_key("a/./b")
    assert not is_legal_key("a@b")
    assert not is_legal_key("x" * 251)
    assert is_legal_key("x" * 250)


def test_flatten_config():
    cfg = {"dataset": {"name": "demo", "cases": "pkg://x"}, "k": 5, "ok": True, "none": None,
           "chunker": {"name": "fixed", "size": 128, "opts": {}},
           "metrics": {"cutoffs": [1, 3, 5]},
           "grader": {"name": "claude", "api_key": "sk-1", "Auth_Token": "t",
                      "models": [{"name": "m", "client_secret": "s"}]},
           "db": {"PASSWORD": "p", "host": "h"}, "secrets": {"a": 1}}
    flat = flatten_config(cfg)
    assert flat == {
        "dataset.name": "demo", "dataset.cases": "pkg://x", "k": "5", "ok": "true",
        "none": "null", "chunker.name": "fixed", "chunker.size": "128", "chunker.opts": "{}",
        "metrics.cutoffs": "[1, 3, 5]", "grader.name": "claude",
        "grader.models": json.dumps([{"name": "m"}]), "db.host": "h",
    }
    assert all(isinstance(v, str) for v in flat.values())
    assert "sk-1" not in json.dumps(flat)


def test_flatten_config_accepts_omegaconf():
    omegaconf = pytest.importorskip("omegaconf")
    cfg = omegaconf.OmegaConf.create({"a": {"b": [1, {"token": "x", "c": 2}]}, "k": 5})
    assert flatten_config(cfg) == {"a.b": '[1, {"c": 2}]', "k": "5"}


def test_metrics_from_summary_maps_every_kind_and_skips_nulls():
    summary = {"overall": {"final.ndcg@5": 0.5, "faithfulness": None, "x": float("nan")},
               "slices": {"intent": {"a/b": {"n": 3, "final.ndcg@5": 1.0, "faithfulness": None}}},
               "metric_versions": {"retrieval": "v1"}, "n_cases": 3, "n_quarantined": 0,
               "errors": 1, "work": {"retrievals": 3, "grader_calls": None}}
    assert metrics_from_summary(summary) == {
        "final.ndcg_at_5": 0.5, "slice/intent/a_sb/n": 3.0,
        "slice/intent/a_sb/final.ndcg_at_5": 1.0, "n_cases": 3.0, "n_quarantined": 0.0,
        "errors": 1.0, "work.retrievals": 3.0}


def test_importing_tracking_and_report_does_not_import_mlflow_or_matplotlib():
    code = ("import sys, raglab.tracking, raglab.tracking.mlflow_store, raglab.tracking.uris, "
            "raglab.report, raglab.report.run_report; "
            "bad = [m for m in ('mlflow', 'matplotlib', 'sqlalchemy', 'pandas') "
            "if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
