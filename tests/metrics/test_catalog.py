"""The one metric table (raglab/metrics/catalog.py) against the manual's generated metric
tables (docs_hooks/tables.py) and the names a run reports."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from raglab.metrics.case import metric_names
from raglab.metrics.catalog import HEADLINE, METRICS, spec_of

ROOT = Path(__file__).resolve().parents[2]


def _hook():
    spec = importlib.util.spec_from_file_location("docs_tables", ROOT / "docs_hooks" / "tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_tables_list_every_metric_once():
    tables = _hook()
    rows: dict[str, str] = {}
    for section in tables.SECTIONS:
        for line in tables.metric_table(section).splitlines()[2:]:
            name = line.split("`")[1].removesuffix("@k")
            assert name not in rows, f"{name} is in two tables ({rows[name]}, {section})"
            rows[name] = section
            spec = METRICS[name]
            assert spec.meaning in line and spec.kind in line
            assert ("★" in line) == bool(spec.headline), name
    assert set(rows) == set(METRICS)


def test_the_metrics_page_has_every_section_table():
    page = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    rendered = _hook().render(page)
    assert "<!-- raglab:metrics" not in rendered
    for name, spec in METRICS.items():
        assert f"`{name}@k`" in rendered if spec.at_k else f"`{name}`" in rendered, name


def test_every_reported_name_is_declared_and_headline_is_reported():
    names = metric_names([1, 3, 5, 10, 20, 50, 100], 5, 50)
    assert all(spec_of(n) is not None for n in names + ["latency_ms.total"])
    assert set(HEADLINE) <= set(names)
    # latencies come from the stages a system reports, their percentiles from aggregation;
    # the monitor's own metrics are not a run's
    assert {spec_of(n).name for n in names} == \
        {n for n, m in METRICS.items() if "run" in m.reported_by} - \
        {"latency_ms.*", "latency_ms.*.p50", "latency_ms.*.p95"}
