"""A tag value that matplotlib would read as math (``$\\frac{1}{$``) is a plain label: the
run, its report and a comparison with it all finish (it used to stop every run and resume
with exit 1, and make compare trace back)."""

from __future__ import annotations

import copy
import json

import pytest

from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl

MATH = "$\\frac{1}{$"


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
def test_a_tag_value_in_dollar_signs_is_drawn_as_written(tmp_path):
    cases = copy.deepcopy(TINY_CASES)
    for c in cases:
        c["tags"]["intent"] = MATH if c["id"] in ("t-1", "t-2") else "a $x$ b"
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    path = write_jsonl(tmp_path / "cases.jsonl", cases)
    common = [f"dataset.corpus={corpus}", f"dataset.cases={path}", "dataset.labels=null",
              "tracking=none", "progress=off", "metrics.cutoffs=[1,3,5]", "k=3",
              "candidate_depth=5", f"cache_dir={tmp_path / 'cache'}"]
    for name in ("a", "b"):
        proc = run_cli("run", *common, f"hydra.run.dir={tmp_path / name}", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / name / "slices.png").stat().st_size > 0
        assert MATH in (tmp_path / name / "report.md").read_text(encoding="utf-8")
    proc = run_cli("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out",
                   str(tmp_path / "cmp"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    slices = {(r["slice"] or {}).get("value") for r in
              json.loads((tmp_path / "cmp" / "compare.json").read_text())["rows"]
              if r.get("slice")}
    assert MATH in slices
