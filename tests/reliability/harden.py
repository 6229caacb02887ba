"""What the hardening regression tests share: two tiny finished runs, made once per module,
and the check that a command failed with one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl

BASE = ["metrics.cutoffs=[1,3,5]", "candidate_depth=5", "progress=off", "tracking=none",
        "dataset.labels=null"]


def make_runs(root: Path) -> tuple[Path, Path]:
    """Two finished runs of the tiny set (k=3 and k=2) under ``root``."""
    corpus = write_jsonl(root / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(root / "cases.jsonl", TINY_CASES)
    runs = []
    for k in (3, 2):
        run_dir = root / f"run-k{k}"
        proc = run_cli("run", *BASE, f"k={k}", f"dataset.corpus={corpus}",
                       f"dataset.cases={cases}", f"hydra.run.dir={run_dir}", cwd=root)
        assert proc.returncode == 0, proc.stderr
        runs.append(run_dir)
    return runs[0], runs[1]


def one_line(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    """The one ``raglab: error:`` line of a command that failed with ``code``."""
    err = [x for x in proc.stderr.splitlines() if x.strip()]
    assert "Traceback" not in proc.stderr and "Error executing job" not in proc.stderr, \
        proc.stderr
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert len(err) == 1 and err[0].startswith("raglab: error: "), proc.stderr
    return err[0]
