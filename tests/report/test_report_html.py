"""report.html (self-contained, titled by the run, opening with its configuration), the
slices heat map (0 apart from n/a, better direction marked, 40 slices), run descriptions
and the sweep tables."""

from __future__ import annotations

import re
import struct

from raglab.report.run_report import plot_slices, slice_cell, write_run_report
from raglab.report.summary import (
    config_diff,
    run_description,
    sweep_markdown,
    sweep_rows,
    sweep_text,
)
from tests.tracking.services import make_run_dir


def _png_size(path):
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    return width, height


def test_report_html_is_self_contained_and_opens_with_the_configuration(tmp_path):
    run_dir = make_run_dir(tmp_path / "run", n_intents=4)
    write_run_report(run_dir, name="size=128 k=5", diffs=[("chunker.size", 256, 128)])
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "<title>size=128 k=5</title>" in html and "<h1>size=128 k=5</h1>" in html
    assert html.index("<h2>Configuration</h2>") < html.index("<h2>Headline metrics</h2>")
    assert "<td>chunker.size</td><td>256</td><td>128</td>" in html
    assert html.count('src="data:image/png;base64,') == 2  # both plots embedded
    assert "<script" not in html and not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "sk-SECRET" not in html and "api_key=***" in html  # the config is redacted
    assert "<td>faithfulness</td>" in html and "↑ higher is better" in html
    md = (run_dir / "report.md").read_text(encoding="utf-8")
    assert md.startswith("# raglab run report: size=128 k=5\n\n## Configuration\n")
    assert "| chunker.size | 256 | 128 |" in md and "| acl_leak_rate |" in md


def test_the_slices_map_tells_zero_from_does_not_apply_and_marks_directions():
    zero, na = slice_cell("acl_leak_rate", 0.0), slice_cell("acl_leak_rate", None)
    assert zero["text"] == "0" and zero["hatch"] is None and zero["good"] == 1.0
    assert na["text"] == "n/a" and na["hatch"] and na["face"] != zero["face"]
    # 0 is the worst recall and the best leak rate: opposite ends of the colour scale
    assert slice_cell("final.evidence_recall", 0.0)["good"] == 0.0
    assert slice_cell("false_refusal_rate", 0.25)["good"] == 0.75
    assert slice_cell("faithfulness", 1.0)["face"] == zero["face"]


def test_forty_slices_get_a_row_each(tmp_path):
    slices = {"intent": {f"i{n:02d}": {"n": n + 1, "faithfulness": None if n % 5 else 0.9,
                                       "acl_leak_rate": 0.0, "final.evidence_recall": n / 40}
                         for n in range(40)}}
    assert plot_slices(slices, tmp_path / "s.png")
    width, height = _png_size(tmp_path / "s.png")
    assert height >= 40 * 0.3 * 100 * 0.9 and width < height  # ~30 px a row, not squeezed
    many = {"user": {f"u{n}": {"n": n, "faithfulness": 0.5} for n in range(120)}}
    assert plot_slices(many, tmp_path / "m.png")
    assert _png_size(tmp_path / "m.png")[1] <= height * 1.1  # capped at the 40 largest


def test_config_diff_names_what_changed_and_skips_bookkeeping():
    defaults = {"k": 5, "chunker": {"name": "recursive", "size": 256}, "cache_dir": ".c",
                "tracking": {"uri": "sqlite:///mlflow.db"}, "run_name": None}
    cfg = {"k": 3, "chunker": {"name": "fixed", "size": 256, "overlap": 0}, "cache_dir": "/x",
           "tracking": {"uri": "sqlite:////tmp/m.db"}, "run_name": "mine"}
    rows = config_diff(defaults, cfg)
    assert [(k, str(d), str(v)) for k, d, v in rows] == [
        ("chunker.name", "recursive", "fixed"), ("chunker.overlap", "(absent)", "0"),
        ("k", "5", "3")]


def test_run_description_leads_with_the_headline():
    metrics = {"overall": {"final.evidence_recall": 0.9, "acl_leak_rate": 0.0,
                           "faithfulness": None, "final.ndcg@5": 0.7},
               "metric_versions": {"retrieval": "3"}, "n_cases": 10, "n_quarantined": 0,
               "errors": 1}
    text = run_description("size=64 k=3", metrics, {"dataset": {"name": "demo"}},
                           [("k", 5, 3)], "#/experiments/1/runs/r/artifacts/report/report.html")
    lines = text.splitlines()
    assert lines[0] == "**size=64 k=3**: dataset demo, 10 cases, 0 quarantined, 1 with errors"
    assert lines[2] == "final.evidence_recall **0.9** ↑ · acl_leak_rate **0** ↓"
    assert "| faithfulness | n/a | ↑ |" in text and "`k` 5 → 3" in text
    assert "**Metric versions:** retrieval 3" in text
    assert "[report.html](#/experiments/1/runs/r/artifacts/report/report.html)" in text


def _jobs(n):
    return [{"num": i, "values": {"k": str(i + 1)},
             "overall": {"final.evidence_recall": i / n, "acl_leak_rate": 0.0}}
            for i in range(n)]


def test_sweep_tables_one_column_per_job_until_they_get_wide():
    header, rows = sweep_rows(_jobs(3), ["k"])
    assert header == ["#", "k", "final.evidence_recall ↑", "acl_leak_rate ↓"]
    text = sweep_text(header, rows, 1)
    assert re.search(r"^k\s+1\s+2\s+3$", text, re.M)
    assert re.search(r"^acl_leak_rate ↓\s+0\s+0\s+0$", text, re.M)
    wide = sweep_text(*sweep_rows(_jobs(12), ["k"]), 1)
    assert wide.splitlines()[0].split() == ["#", "k", "final.evidence_recall", "↑",
                                            "acl_leak_rate", "↓"]
    md = sweep_markdown("k sweep", _jobs(3), ["k"], "/s")
    assert "| job | 0 | 1 | 2 |" in md and "| k | 1 | 2 | 3 |" in md
    # the best job by the first headline metric that differs (acl_leak_rate is all 0)
    assert md.splitlines()[2] == "best final.evidence_recall ↑: job 2 (k=3), 0.6667"


def test_the_parent_description_fits_mlflow_s_tag_limit():
    md = sweep_markdown("k sweep", _jobs(400), ["k"], "/s", limit=8000)
    assert len(md) <= 8000 and "more jobs in `sweep.html`" in md
    assert "| 0 | 1 |" in md  # the first jobs are kept
