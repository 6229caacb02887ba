"""A sample too small to judge says so: how many lines were read and sampled at the rate, and
the rate that samples enough (30 lines at the default 0.05 used to judge none in silence)."""

from __future__ import annotations

import json
import re

import pytest

from raglab.monitor.traffic import ENOUGH_JUDGED, TrafficLine, rate_for, sample_note, sampled
from tests.conftest import run_cli
from tests.monitor.traffic import traffic_lines, write_traffic


def _lines(n: int, seed: int) -> list[TrafficLine]:
    return [TrafficLine.model_validate(r) for r in traffic_lines(n, seed)]


@pytest.mark.parametrize("n, seed", [(30, 10), (30, 1), (100, 3), (300, 1), (2000, 9)])
def test_the_rate_is_the_smallest_of_two_figures_that_samples_enough(n, seed):
    lines = _lines(n, seed)
    want = min(ENOUGH_JUDGED, n)
    rate = rate_for(lines, want)
    assert rate == float(f"{rate:.2g}")  # two significant figures
    assert sum(sampled(ln, rate) for ln in lines) >= want
    digits = f"{rate:.1e}"  # d.de-x: the next rate of two figures below it
    lower = float(digits) - 10.0 ** (int(digits.split("e")[1]) - 1)
    assert sum(sampled(ln, lower) for ln in lines) < want


def test_the_note_names_the_counts_and_a_rate_or_nothing():
    lines = _lines(30, 10)  # none of them in the 5% sample
    assert sum(sampled(ln, 0.05) for ln in lines) == 0
    rate = rate_for(lines, 20)
    assert sample_note(lines, 0.05, "traces") == (
        "sample: 0 of 30 traces sampled at monitor.sample_rate=0.05: nothing is judged and no "
        f"window is tested for contradictions; monitor.sample_rate={rate:g} samples "
        f"{sum(sampled(ln, rate) for ln in lines)} of them")
    few = _lines(5, 1)
    assert sample_note(few, 0.05).endswith("monitor.sample_rate=1 samples all 5")
    assert sample_note(few, 1.0) is None
    assert sample_note(_lines(1000, 1), 0.05) is None  # 45 sampled


def test_monitor_says_when_its_sample_is_empty_and_the_rate_that_would_do(tmp_path):
    t = write_traffic(tmp_path / "t.jsonl", traffic_lines(30, 10), bad=False)
    p = run_cli("monitor", str(t), "tracking=none", f"cache_dir={tmp_path / 'cache'}",
                f"hydra.run.dir={tmp_path / 'm'}", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    (note,) = [ln for ln in p.stdout.splitlines() if ln.startswith("sample: ")]
    assert note.startswith("sample: 0 of 30 lines sampled at monitor.sample_rate=0.05: "
                           "nothing is judged")
    rate = re.search(r"; monitor\.sample_rate=([\d.]+) samples (\d+) of them$", note)
    assert rate and int(rate.group(2)) >= 20  # what that rate samples: the test above
    assert float(rate.group(1)) == rate_for(_lines(30, 10), 20)
    doc = json.loads((tmp_path / "m" / "monitor.json").read_text())
    assert doc["lines"] == 30 and sum(w["sampled"] for w in doc["windows"]) == 0
