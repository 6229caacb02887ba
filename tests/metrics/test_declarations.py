"""Each metric declared once, next to the code that computes it: every name a demo run
writes has its declaration, every declaration is computed, and the lists derived from the
declarations keep the orders users see."""

from __future__ import annotations

import json

import pytest

from raglab.metrics import aggregate, catalog, conversation, generation, operational, retrieval
from raglab.metrics.catalog import (
    CALIBRATED_BY,
    CONVERSATION_METRICS,
    FAMILIES,
    FLIP_THRESHOLDS,
    GRADED_FAMILIES,
    HEADLINE,
    METRICS,
    MONITORED,
    SWEEP_TERMINAL,
    spec_of,
)
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The shipped demo run (heuristic grader): ``(records, metrics.json)``."""
    tmp = tmp_path_factory.mktemp("demo")
    p = run_cli("run", f"hydra.run.dir={tmp / 'run'}", "tracking=none", "progress=off",
                f"cache_dir={tmp / 'cache'}", cwd=tmp)
    assert p.returncode == 0, p.stderr[-2000:]
    records = [json.loads(x) for x in (tmp / "run" / "records.jsonl").read_text().splitlines()
               if x.strip()]
    return records, json.loads((tmp / "run" / "metrics.json").read_text())


def _reported_names(records, metrics) -> set[str]:
    names = {n for r in records for n in r["metrics"]}
    names |= set(metrics["overall"])
    names |= {n for groups in metrics["slices"].values() for g in groups.values() for n in g
              if n != "n"}
    return names


def test_every_name_a_run_writes_has_one_declaration(demo):
    records, metrics = demo
    names = _reported_names(records, metrics)
    assert names and all(spec_of(n) is not None for n in names), \
        sorted(n for n in names if spec_of(n) is None)
    # one declaration per name: no two modules declare the same metric
    declared = [m.name for mod in (retrieval, generation, operational, aggregate,
                                   conversation) for m in mod.DECLARED]
    assert len(declared) == len(set(declared)) == len(METRICS)
    # a latency's percentile is its own declaration, not the latency's
    assert spec_of("latency_ms.total.p95").name == "latency_ms.*.p95"
    assert spec_of("latency_ms.total").name == "latency_ms.*"


def test_every_declaration_is_computed(demo):
    """Each declaration a run reports shows up in the demo run's metrics.json overall (the
    latencies through the stages the reference system reports); the others are the
    monitor's, computed per window by ``raglab monitor`` (tests/monitor), or a run's with
    conversations, once per run (tests/conversations/test_metrics*.py)."""
    _, metrics = demo
    seen = {spec_of(n).name for n in metrics["overall"]}
    for name, spec in METRICS.items():
        if "run" in spec.reported_by:
            assert name in seen, f"{name} is declared but the demo run does not report it"
        elif spec.reported_by == ("conversations",):
            assert name in CONVERSATION_METRICS, name
        else:
            assert spec.reported_by == ("monitor",) and name in MONITORED, name


def test_families_follow_metric_versions_order(demo):
    _, metrics = demo
    assert list(metrics["metric_versions"]) == [*FAMILIES, "diagnosis"]
    assert FAMILIES == ("retrieval", "faithfulness", "citations", "correctness", "relevance",
                        "nuggets", "abstention")
    assert GRADED_FAMILIES == FAMILIES[1:]
    assert CALIBRATED_BY == {"faithfulness": "claims", "citations": "claims",
                             "correctness": "claims", "nuggets": "nuggets"}


def test_derived_lists_keep_the_orders_users_see():
    assert HEADLINE == (
        "candidate.evidence_recall", "final.evidence_recall", "final.ndcg", "final.mrr",
        "acl_leak_rate", "faithfulness", "contradicted_claim_rate", "citation_precision",
        "correctness", "relevance", "vital_nugget_recall", "false_refusal_rate",
        "false_answer_rate", "must_not_contain_rate")
    assert all(METRICS[n].headline for n in HEADLINE)
    assert not any(m.headline for n, m in METRICS.items() if n not in HEADLINE)
    assert list(FLIP_THRESHOLDS.items()) == [
        ("vital_nugget_recall", 1.0), ("faithfulness", 1.0), ("final.evidence_recall", 1.0),
        ("false_refusal_rate", 0.0), ("false_answer_rate", 0.0)]
    assert SWEEP_TERMINAL == ("final.evidence_recall", "faithfulness", "vital_nugget_recall",
                              "false_refusal_rate", "false_answer_rate")
    assert MONITORED == ("faithfulness", "contradicted_claim_rate", "relevance",
                         "reference_free_context_precision")
    # monitor's reference-free context precision is not the run's label-based one
    assert spec_of("reference_free_context_precision") is not spec_of("final.context_precision")
    assert "context_precision" not in METRICS


def test_kind_rates_are_declared_with_their_kind():
    from raglab.data.schema import MUST_NOT_CONTAIN_KINDS

    assert tuple(generation.MNC_KIND_METRICS) == MUST_NOT_CONTAIN_KINDS
    assert all(spec_of(n).family == "abstention" for n in generation.MNC_KIND_METRICS.values())


def test_the_catalog_imports_no_module_that_imports_it():
    """The computing modules declare; the catalog collects (no cycle through it)."""
    import ast
    import inspect

    for mod in (retrieval, generation, operational, aggregate):
        tree = ast.parse(inspect.getsource(mod))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert catalog.__name__ not in imported, mod.__name__


def _metric_reads(module) -> set[str]:
    """The names a module reads out of a metrics dict ``m``: ``m.get("x")``, ``m["x"]``,
    ``f(m, "x")``."""
    import ast
    import inspect
    from itertools import pairwise

    names: set[str] = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.Call):
            func, args = node.func, node.args
            if isinstance(func, ast.Attribute) and func.attr == "get" and \
                    isinstance(func.value, ast.Name) and func.value.id == "m":
                args = [func.value, *args]
            for a, b in pairwise(args):
                if isinstance(a, ast.Name) and a.id == "m" and isinstance(b, ast.Constant) \
                        and isinstance(b.value, str):
                    names.add(b.value)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                node.value.id == "m" and isinstance(node.slice, ast.Constant):
            names.add(node.slice.value)
    return names


def test_the_failure_checks_read_declared_metrics():
    from raglab.cases import drafts
    from raglab.metrics import diagnosis

    for module in (diagnosis, drafts):
        reads = _metric_reads(module)
        assert reads and all(spec_of(n) is not None for n in reads), (module.__name__, reads)
    # a draft's reasons cite only figures the diagnosis checks
    assert _metric_reads(drafts) <= _metric_reads(diagnosis)
