"""Run names from the redacted config, headline-only slice metrics, the saved view's state."""

from __future__ import annotations

import json
import re

from raglab.metrics.catalog import HEADLINE
from raglab.runner.naming import run_name, sweep_name
from raglab.secrets import redact
from raglab.tracking.keys import metrics_from_summary
from raglab.tracking.mlflow_ui import view_state, view_url


def test_run_names_keep_every_swept_value_and_never_a_secret():
    cfg = redact({"chunker": {"name": "fixed", "size": 128}, "k": 5,
                  "system": {"headers": {"Authorization": "Bearer sk-SECRET"},
                             "api_key": "sk-SECRET2"},
                  "dataset": {"cases": "/data/sets/cases30.jsonl"},
                  "tracking": {"uri": "sqlite:///x.db"}})
    keys = ["chunker.size", "k", "system.headers.Authorization", "system.api_key",
            "dataset.cases", "tracking.uri", "hydra.run.dir"]
    name = run_name(cfg, keys)
    # a file by its base name, and a fingerprint of the settings, saying which one it
    # stands for, since the name shows less of them (two folders' cases30.jsonl differ)
    assert re.fullmatch(r"size=128 k=5 cases=cases30\.jsonl \(cases #[0-9a-f]{6}\)", name)
    assert "SECRET" not in name and "***" not in name
    assert run_name(cfg, ["chunker"], {"chunker": "fixed"}) == "chunker=fixed"
    assert run_name({"a": {"size": 1}, "b": {"size": 2}}, ["a.size", "b.size"]) == \
        "a.size=1 b.size=2"  # a shared last part is spelt out
    assert run_name(cfg, []) == "defaults"
    assert sweep_name(["chunker.size", "k"]) == "sweep size × k"
    assert sweep_name(["chunker.size", "k"], {"chunker.size": ["64", "128"], "k": ["3", "5"]}) \
        == "sweep size=64,128 × k=3,5"


def test_slice_metrics_headline_keeps_every_overall_metric():
    summary = {"overall": {"faithfulness": 0.5, "candidate.ndcg@10": 0.4},
               "slices": {"intent": {"a": {"n": 3, "faithfulness": 0.5,
                                           "candidate.ndcg@10": 0.4}}}}
    every = metrics_from_summary(summary)
    headline = metrics_from_summary(summary, slice_names=set(HEADLINE))
    assert "slice/intent/a/candidate.ndcg_at_10" in every
    assert "slice/intent/a/candidate.ndcg_at_10" not in headline
    assert {"slice/intent/a/faithfulness", "slice/intent/a/n", "candidate.ndcg_at_10"} \
        <= set(headline)


def test_saved_view_state_opens_on_the_headline():
    state = view_state(["chunker.size", "k"], ["final.evidence_recall", "final.ndcg@5"],
                       "tags.`mlflow.parentRunId` = 'p'")
    assert state["selectedColumns"] == ["params.`chunker.size`", "params.`k`",
                                        "metrics.`final.evidence_recall`",
                                        "metrics.`final.ndcg_at_5`"]
    assert state["columnOrder"] == state["selectedColumns"]
    par, *bars = state["compareRunCharts"]
    assert par["type"] == "PARALLEL" and par["selectedMetrics"][1] == "final.ndcg_at_5"
    assert [b["metricKey"] for b in bars] == ["final.evidence_recall", "final.ndcg_at_5"]
    assert {c["metricSectionId"] for c in state["compareRunCharts"]} == \
        {state["compareRunSections"][0]["uuid"]}
    json.dumps(state)  # serialisable as the tag's state
    assert view_url("sqlite:///m.db", "3", "v") == \
        "http://127.0.0.1:5000/#/experiments/3/runs?viewStateShareKey=v"
