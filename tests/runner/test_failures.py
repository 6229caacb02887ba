"""When cases fail, the run says why: the most frequent errors with their counts and one
case each, in metrics.json, in the console summary and in the line a failed run exits with."""

from __future__ import annotations

import json
import os

from raglab.runner.failures import error_kind, error_summary, summary_lines
from tests.conftest import REPO, run_cli

FAILING = '''
def make(options):
    class Down:
        def answer(self, request):
            if request.case_id == "t-2":
                raise ValueError(f"bad input for case {request.case_id!r}")
            raise ConnectionRefusedError(111, "Connection refused")
    return Down()
'''


def test_errors_are_grouped_by_message_with_their_per_case_parts_set_aside():
    records = [{"case_id": "a", "error": "system: HTTPError: 503 from http://h:8000/x/1"},
               {"case_id": "b", "error": None},
               {"case_id": "c", "error": "system: ValueError: bad value 'c' at 17"},
               {"case_id": "d", "error": "system: HTTPError: 502 from http://h:8000/x/2"},
               {"case_id": "e", "error": "system: ValueError: bad value 'e' at 3"},
               {"case_id": "f", "error": "system: HTTPError: 500 from http://h:8000/x/9"},
               {"case_id": "g", "error": "grader: faithfulness: timed out"}]
    assert error_kind("bad value 'c' at 17") == error_kind("bad value 'e' at 3")
    assert error_summary(records) == [
        {"count": 3, "error": "system: HTTPError: 503 from http://h:8000/x/1",
         "example_case_id": "a"},
        {"count": 2, "error": "system: ValueError: bad value 'c' at 17", "example_case_id": "c"},
        {"count": 1, "error": "grader: faithfulness: timed out", "example_case_id": "g"}]
    assert error_summary(records, top=1)[0]["count"] == 3
    assert error_summary([{"case_id": "a", "error": None}]) == []
    line = summary_lines([{"count": 3, "error": "x" * 300, "example_case_id": "a"}], width=20)
    assert line == ["3 x " + "x" * 17 + "... (e.g. case a)"]


def test_a_run_whose_cases_all_fail_names_the_most_frequent_error(tmp_path, tiny):
    corpus, cases = tiny
    (tmp_path / "down.py").write_text(FAILING, encoding="utf-8")
    proc = run_cli("run", "system=python", "system._target_=down.make",
                   f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null",
                   "tracking=none", "grader=none", "progress=off", f"cache_dir={tmp_path}/c",
                   f"hydra.run.dir={tmp_path}/run", cwd=tmp_path,
                   env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"})
    assert proc.returncode == 1
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    n = metrics["n_cases"]
    assert metrics["errors"] == n and n >= 2
    top = metrics["error_summary"]
    assert [r["count"] for r in top] == [n - 1, 1]
    assert top[0]["error"] == "system: ConnectionRefusedError: [Errno 111] Connection refused"
    assert top[1] == {"count": 1, "error": "system: ValueError: bad input for case 't-2'",
                      "example_case_id": "t-2"}
    assert "most frequent errors" in proc.stdout
    assert f"{n - 1} x system: ConnectionRefusedError" in proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"raglab: error: {n} of {n} cases failed")
    assert f"most frequent: {n - 1} x system: ConnectionRefusedError" in last
