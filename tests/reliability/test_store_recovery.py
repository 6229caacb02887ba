"""A full disk while MLflow's sqlite store is being created used to break it for good
(``table spans already exists`` on every later run). Now a new store is created under a
temporary name and renamed into place (a failure leaves nothing behind), and a store left
half-created (by MLflow itself, or an older raglab) is named in one line saying how to
recover. The full disk is a file-size limit (RLIMIT_FSIZE) on the real process."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TINY_CASES, TINY_CORPUS, write_jsonl

LIMIT = 300_000  # bytes: a complete MLflow store is about 1 MB


def _limited(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails: EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}


def _run(d: Path, name: str, limit: int | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "raglab.cli", "run", f"hydra.run.dir={d / name}",
           f"tracking.uri=sqlite:///{d / 'mlflow.db'}", f"dataset.corpus={d / 'corpus.jsonl'}",
           f"dataset.cases={d / 'cases.jsonl'}", "grader=none", "progress=off"]
    return subprocess.run(cmd, cwd=d, env=_env(), capture_output=True, text=True, timeout=300,
                          preexec_fn=_limited(limit) if limit else None)


@pytest.fixture
def data(tmp_path) -> Path:
    write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    return tmp_path


def _one_line(p: subprocess.CompletedProcess) -> str:
    err = p.stderr.strip()
    assert "Traceback" not in err, err[-3000:]
    last = err.splitlines()[-1]
    assert last.startswith("raglab: error:"), err[-3000:]
    return last


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_a_full_disk_while_the_store_is_created_leaves_nothing_broken(data):
    p = _run(data, "full", limit=LIMIT)
    assert p.returncode == 2, p.stderr[-3000:]
    assert "cannot create the MLflow store" in _one_line(p)
    assert not (data / "mlflow.db").exists()
    assert not list(data.glob(".mlflow.db.*"))  # no temporary file left either
    (data / ".mlflow.db.k1ll3d.tmp").write_bytes(b"half")  # as a killed creation leaves it
    p = _run(data, "again")  # space is back: the store is created whole, the run logged
    assert p.returncode == 0, p.stderr[-3000:]
    assert not list(data.glob(".mlflow.db.*"))


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_a_half_created_store_is_named_with_how_to_recover(data):
    db = data / "mlflow.db"
    make = ("import sys; from mlflow.tracking import MlflowClient\n"
            "try:\n    MlflowClient(tracking_uri=sys.argv[1]).search_experiments()\n"
            "except Exception: pass\n")
    subprocess.run([sys.executable, "-c", make, f"sqlite:///{db}"], env=_env(), timeout=300,
                   capture_output=True, preexec_fn=_limited(LIMIT))
    assert db.is_file() and db.stat().st_size > 0  # MLflow left its half-made store
    p = _run(data, "half")
    assert p.returncode == 2, p.stderr[-3000:]
    line = _one_line(p)
    assert "half-created MLflow store" in line and f"mv {db} {db}.broken" in line
    db.rename(f"{db}.broken")  # what the line says
    p = _run(data, "after")
    assert p.returncode == 0, p.stderr[-3000:]
