"""The one metric table (raglab/metrics/catalog.py) against the README's metric tables and
the names a run reports."""

from __future__ import annotations

import re
from pathlib import Path

from raglab.metrics.case import metric_names
from raglab.metrics.catalog import HEADLINE, METRICS, STAGES, spec_of

README = Path(__file__).resolve().parents[2] / "README.md"
_ROW = re.compile(r"^\| `(?P<name>[^`]+)` \| (?P<meaning>.+) \|$")


def readme_metric_rows() -> dict[str, str]:
    """``{catalog name: meaning}`` from the tables of the README's "Metrics" section."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n### Metrics\n", 1)[1].split("\n### ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        name, meaning = m.group("name"), m.group("meaning")
        if name.startswith("latency_ms.{stage}"):
            names = [name.replace("{stage}", "*")]
        elif name.startswith("{stage}."):
            base = name[len("{stage}."):].removesuffix("@k")
            names = [f"{s}.{base}" for s in STAGES]
            for n in names:
                assert METRICS[n].at_k == name.endswith("@k"), f"{name}: @k differs from the catalog"
        else:
            names = [name]
        for n in names:
            assert n not in rows, f"{n} is in the README's tables twice"
            rows[n] = meaning
    return rows


def test_readme_tables_list_exactly_the_catalog():
    rows = readme_metric_rows()
    assert set(rows) == set(METRICS)
    for name, meaning in rows.items():
        assert meaning == METRICS[name].meaning, f"{name}: README and catalog meanings differ"


def test_every_reported_name_is_declared_and_headline_is_reported():
    names = metric_names([1, 3, 5, 10, 20, 50, 100], 5, 50)
    assert all(spec_of(n) is not None for n in names + ["latency_ms.total"])
    assert set(HEADLINE) <= set(names)
    # latencies come from the stages a system reports, their percentiles from aggregation;
    # the monitor's own metrics are not a run's
    assert {spec_of(n).name for n in names} == \
        {n for n, m in METRICS.items() if "run" in m.reported_by} - \
        {"latency_ms.*", "latency_ms.*.p50", "latency_ms.*.p95"}
