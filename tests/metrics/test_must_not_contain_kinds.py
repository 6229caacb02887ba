"""Known answers for must_not_contain kinds: plain and kinded entries, a rate per kind beside
the overall rate, through case metrics and the catalog, and the demo's adversarial cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raglab.data.schema import Case
from raglab.metrics import generation as gen
from raglab.metrics.case import case_metrics

DEMO = Path(__file__).resolve().parents[2] / "raglab" / "datasets" / "demo"


# -- must_not_contain kinds -----------------------------------------------------------

def test_schema_accepts_plain_and_kinded_entries():
    c = Case(id="x", question="q?", must_not_contain=[
        "old", {"text": "PINEAPPLE-7", "kind": "injection"}])
    assert c.must_not_contain[0] == "old"
    assert c.must_not_contain[1].kind == "injection"
    with pytest.raises(ValueError):
        Case(id="x", question="q?", must_not_contain=[{"text": "a", "kind": "typo"}])
    with pytest.raises(ValueError):
        Case(id="x", question="q?", must_not_contain=[{"text": " "}])


MNC = ["plain", {"text": "PINEAPPLE-7", "kind": "injection"},
       {"text": "20th", "kind": "outdated"}, {"text": "sk-live-123", "kind": "secret"}]


def test_each_kind_has_its_rate_beside_the_overall_rate():
    m = gen.must_not_contain_metrics("The cut-off is the 20th.", MNC)
    assert m == {"must_not_contain_rate": 1.0, "injection_success_rate": 0.0,
                 "outdated_value_rate": 1.0, "secret_leak_rate": 0.0, "distractor_rate": None}
    m = gen.must_not_contain_metrics("Reply with pineapple 7", MNC)
    assert m["injection_success_rate"] == 1.0 and m["outdated_value_rate"] == 0.0
    m = gen.must_not_contain_metrics("Just the plain truth.", MNC)
    assert m["must_not_contain_rate"] == 1.0 and m["injection_success_rate"] == 0.0
    assert all(v is None for v in gen.must_not_contain_metrics(None, MNC).values())
    assert all(v is None for v in gen.must_not_contain_metrics("x", []).values())


def test_kind_rates_flow_through_case_metrics_and_the_catalog():
    from raglab.metrics.catalog import spec_of

    rec = {"case_id": "x", "tags": {}, "error": None, "graded": False,
           "gold": {"answerable": True, "grades": [], "nuggets_vital": [],
                    "has_reference": False,
                    "must_not_contain": [{"text": "PINEAPPLE-7", "kind": "injection"}]},
           "output": {"answer": "PINEAPPLE-7", "context": [], "candidates": [],
                      "citations": [], "latency_ms": {}, "usage": {}},
           "judgments": {"candidates": [], "context": [], "leaks": [], "unknown_docs": []},
           "verdicts": []}
    m = case_metrics(rec, [1], 1, 1)
    assert m["injection_success_rate"] == 1.0 and m["must_not_contain_rate"] == 1.0
    assert m["secret_leak_rate"] is None
    for name in gen.MNC_KIND_METRICS.values():
        spec = spec_of(name)
        assert spec is not None and spec.family == "abstention" and spec.direction == "lower"
def test_demo_entries_have_kinds_and_adversarial_slices():
    cases = [json.loads(line) for line in (DEMO / "cases.jsonl").open(encoding="utf-8")]
    kinds = set()
    for c in cases:
        for e in c["must_not_contain"]:
            assert isinstance(e, dict) and e["kind"] in gen.MNC_KIND_METRICS, (c["id"], e)
            kinds.add(e["kind"])
    assert kinds == set(gen.MNC_KIND_METRICS)
    values = {c["tags"].get("adversarial") for c in cases}
    assert values == {"injection", "near_duplicate", "withdrawn_policy", "cross_section",
                      "counter_common_knowledge", "none"}
    inj = [c for c in cases if c["tags"]["adversarial"] == "injection"]
    assert all(any(e["kind"] == "injection" for e in c["must_not_contain"]) for c in inj)
