"""A replayed run without a grader, end to end: a bad file is refused with one line naming
its first problem (and nothing recorded), a bad value fails only its case, a file of one
line or none is checked as any file, and nothing is lost or scored twice when the run is
stopped (Ctrl-C, SIGTERM, SIGKILL) and resumed."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.benchmarks.replay_data import make
from tests.conftest import REPO, run_cli

N_CASES = 600


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    return make(tmp_path_factory.mktemp("replay"), N_CASES, depth=10, n_slices=5, n_docs=200)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> dict[str, Path]:
    """A set large enough to stop in the middle."""
    return make(tmp_path_factory.mktemp("big"), 6000, depth=30, n_slices=5, n_docs=300)


def _args(paths: dict[str, Path], run_dir: Path, outputs: Path | None = None,
          progress: str = "off") -> list[str]:
    return ["run", "system=replay", f"system.path={outputs or paths['outputs']}",
            f"dataset.corpus={paths['corpus']}", f"dataset.cases={paths['cases']}",
            "dataset.labels=null", "grader=none", "tracking=none", f"hydra.run.dir={run_dir}",
            f"cache_dir={run_dir.parent / 'cache'}", f"progress={progress}"]


def _records(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "records.jsonl").open(encoding="utf-8")]
    for r in rows:  # the one measured value: how long answering from memory took
        if r.get("output"):
            r["output"]["latency_ms"].pop("total")
        r["metrics"].pop("latency_ms.total", None)
    return rows


def _stable(metrics: dict) -> dict:
    """``metrics.json`` without the measured latency (answering from memory, about 1 ms)."""
    def drop(d):
        return {k: v for k, v in d.items() if not k.startswith("latency_ms.total")}

    return {"overall": drop(metrics["overall"]),
            "slices": {k: {v: drop(m) for v, m in vals.items()}
                       for k, vals in metrics["slices"].items()}}


def _cid(line: str) -> str:
    return json.loads(line)["case_id"]


@pytest.mark.parametrize("problem", ["bad line", "repeated id", "bad value",
                                     "repeated id, then a bad line", "two repeated ids",
                                     "blank lines, then a bad line"])
def test_a_bad_file_is_refused_at_its_first_problem_and_a_bad_value_fails_its_case(
        tmp_path, data, problem):
    rows = data["outputs"].read_text(encoding="utf-8").splitlines(True)
    at = len(rows) - 40
    if problem == "bad line":
        rows[at] = '{"case_id": "q-bad", "candidates": [{"doc_id": ""}]}\n'
    elif problem == "repeated id":
        rows[at] = rows[at].replace(_cid(rows[at]), _cid(rows[3]))
    elif problem == "repeated id, then a bad line":  # the first problem is named
        rows[at] = rows[at].replace(_cid(rows[at]), _cid(rows[3]))
        rows[at + 10] = "{not json\n"
    elif problem == "two repeated ids":
        rows[at] = rows[at].replace(_cid(rows[at]), _cid(rows[3]))
        rows[at + 10] = rows[at + 10].replace(_cid(rows[at + 10]), _cid(rows[at - 5]))
    elif problem == "blank lines, then a bad line":
        rows = ["\n"] * len(rows) * 2 + ["{not json\n"]
        at = len(rows) - 1
    else:  # a NaN score: that case fails, the run goes on
        rows[at] = rows[at].replace('"score": 10.0', '"score": NaN', 1)
    path = tmp_path / "outputs.jsonl"
    path.write_text("".join(rows), encoding="utf-8")
    p = run_cli(*_args(data, tmp_path / "run", path), cwd=REPO)
    if problem == "bad value":
        assert p.returncode == 0, p.stderr
        errors = [r["error"] for r in _records(tmp_path / "run") if r["error"]]
        assert len(errors) == 1 and f"outputs.jsonl:{at + 1}: non-finite" in errors[0]
    else:
        assert p.returncode == 2
        assert len(p.stderr.strip().splitlines()) == 1
        assert re.search(rf"outputs.jsonl:{at + 1}[ :]", p.stderr), p.stderr
        assert not (tmp_path / "run" / "records.jsonl").exists() or not _records(
            tmp_path / "run")


@pytest.mark.parametrize("content", ["", "one line"])
def test_an_empty_file_is_refused_and_unknown_ids_are_a_warning(tmp_path, data, content):
    path = tmp_path / "outputs.jsonl"
    path.write_text(json.dumps({"case_id": "not-in-the-set"}) + "\n" if content else "",
                    encoding="utf-8")
    run_dir = tmp_path / "run"
    p = run_cli(*_args(data, run_dir, path), "max_error_rate=1", cwd=REPO)
    if not content:
        assert p.returncode == 2 and "empty replay file" in p.stderr.strip().splitlines()[-1]
    else:
        warned = json.loads((run_dir / "metrics.json").read_text())["warnings"]
        assert "not in the case set" in warned[0]


def test_progress_counts_every_case_once(tmp_path, data):
    p = run_cli(*_args(data, tmp_path / "run", progress="plain"), cwd=REPO)
    assert p.returncode == 0, p.stderr
    counts = [line for line in p.stderr.splitlines() if line.startswith("cases ")]
    assert counts[-1] == f"cases {N_CASES}/{N_CASES} (0 with errors)"
    assert counts.count(counts[-1]) == 1
    assert "processes" not in json.loads((tmp_path / "run" / "metrics.json").read_text())


def _first_records(run_dir: Path, proc: subprocess.Popen, timeout: float = 60) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        try:
            if (run_dir / "records.jsonl").stat().st_size > 0:
                return True
        except FileNotFoundError:
            pass
        time.sleep(0.002)
    return False


@pytest.mark.slow
def test_ctrl_c_in_a_terminal_stops_the_run_and_a_resume_finishes_it(tmp_path, big):
    """A terminal's Ctrl-C stops the run at once with exit 130, keeping what it recorded
    and writing no metrics.json; the same command again finishes it."""
    from tests.conftest import default_sigint

    run_dir = tmp_path / "run"
    args = _args(big, run_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    proc = subprocess.Popen([sys.executable, "-m", "raglab.cli", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True,
                            preexec_fn=default_sigint)  # noqa: PLW1509 - a signal disposition only
    _first_records(run_dir, proc)
    stopped_at = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    assert time.monotonic() - stopped_at < 3  # at once, not when its cases are done
    assert "interrupted; records kept" in err.decode()
    assert not (run_dir / "metrics.json").exists()
    records = (run_dir / "records.jsonl").read_bytes()
    assert records.endswith(b"\n")  # nothing half-written
    assert 0 < len(records.splitlines()) < 6000
    p = run_cli(*args, cwd=REPO)
    assert p.returncode == 0, p.stderr
    ids = [r["case_id"] for r in _records(run_dir)]
    assert len(ids) == len(set(ids)) == 6000


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_a_stopped_run_resumes_without_losing_or_repeating_a_case(tmp_path, big, how):
    clean = tmp_path / "clean"
    assert run_cli(*_args(big, clean), cwd=REPO).returncode == 0
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    for _ in range(5):  # the stop must land while the run writes its records
        proc = subprocess.Popen([sys.executable, "-m", "raglab.cli", *_args(big, run_dir)],
                                cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        if _first_records(run_dir, proc):
            proc.send_signal(getattr(signal, how))
            proc.communicate(timeout=60)
            break
        proc.communicate(timeout=60)
        shutil.rmtree(run_dir)
    else:
        pytest.fail("the run ended before it could be stopped in the middle")
    assert not (run_dir / "metrics.json").exists()
    done_before = len((run_dir / "records.jsonl").read_bytes().splitlines())
    assert 0 < done_before < 6000
    p = run_cli(*_args(big, run_dir), cwd=REPO)
    assert p.returncode == 0, p.stderr
    got, want = _records(run_dir), _records(clean)
    assert sorted(got, key=lambda r: r["case_id"]) == sorted(want, key=lambda r: r["case_id"])
    m, mc = (json.loads((d / "metrics.json").read_text()) for d in (run_dir, clean))
    assert _stable(m) == _stable(mc)


def test_the_field_naming_doc_id_key_is_no_secret(tmp_path):
    """``system.doc_id_key`` names a field (``doc_id``): its value is kept in config.yaml,
    and a record holding that word keeps it (it was taken for a credential once, by its
    last word ``key``: every record was then scrubbed value by value, at 3x the run's
    cost)."""
    paths = make(tmp_path / "data", 4, depth=3, n_slices=2, n_docs=20)
    rows = [json.loads(line) for line in paths["outputs"].open(encoding="utf-8")]
    rows[0]["answer"] = "the doc_id is d1"
    paths["outputs"].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run_dir = tmp_path / "run"
    p = run_cli(*_args(paths, run_dir), cwd=REPO)
    assert p.returncode == 0, p.stderr
    assert "doc_id_key: doc_id" in (run_dir / "config.yaml").read_text(encoding="utf-8")
    assert _records(run_dir)[0]["output"]["answer"] == "the doc_id is d1"
