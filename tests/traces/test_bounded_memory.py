"""A 200 MB OTLP JSON trace file is read in the memory of a 20 MB one (issue 33 item 3:
memory bounded by one trace, not by the file). The figures: ``python -m tests.benchmarks
traces_in --part memory``."""

from __future__ import annotations

import pytest

from tests.benchmarks.bench_traces_in import READ, TARGET_MEMORY, write_traces
from tests.benchmarks.common import python, timed_process


@pytest.mark.slow
def test_a_200_mb_trace_file_is_read_in_bounded_memory(tmp_path):
    peaks = {}
    for mb in (20, 200):
        path = tmp_path / f"traces-{mb}.jsonl"
        n = write_traces(path, mb=mb)
        assert path.stat().st_size >= mb * 1e6 and n > 500
        peaks[mb] = timed_process([python(), "-c", READ, str(path)])["rss_mib"]
        path.unlink()
    assert peaks[200] <= peaks[20] * TARGET_MEMORY, peaks
