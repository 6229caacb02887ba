"""Two ``raglab label --from`` at once on one run (real subprocesses): the run directory's
lock is taken before anything is read, so the one refused stores nothing, and the estimates
are of every label stored (read again under the lock)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from raglab.runner.lock import RunDirLock
from tests.conftest import run_cli


def _rows(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _filled(path, rows):
    path.write_text("".join(json.dumps({**r, "label": "no" if i % 3 == 0 else "yes"}) + "\n"
                            for i, r in enumerate(rows)))
    return path, {r["case_id"] for r in rows}


def _stored(run):
    f = run / "labels" / "labels.jsonl"
    return {r["case_id"] for r in _rows(f)} if f.exists() else set()


def test_label_from_stores_nothing_when_refused_and_estimates_all_it_stored(runs, tmp_path):
    from raglab.commands.label import main

    a, _ = runs
    main([str(a), "--n", "22", "--metrics", "correctness"])  # (the sample: in this process)
    rows = _rows(a / "labels" / "to-label.jsonl")
    files = [_filled(tmp_path / "first.jsonl", rows[:11]),
             _filled(tmp_path / "second.jsonl", rows[11:])]
    metrics_before = (a / "metrics.json").read_bytes()
    # another process holds the run directory: refused with one line, nothing stored
    lock = RunDirLock(a).acquire()
    try:
        p = run_cli("label", str(a), "--from", str(files[0][0]), cwd=tmp_path)
    finally:
        lock.release()
    assert p.returncode == 2, p.stderr
    assert not _stored(a) and (a / "metrics.json").read_bytes() == metrics_before
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert f"{a}: another raglab process (pid {os.getpid()} " in p.stderr
    assert "nothing was stored" in p.stderr
    # two at once: each stores all of its labels or none; the estimate counts every one
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    procs = [subprocess.Popen([sys.executable, "-m", "raglab.cli", "label", str(a), "--from",
                               str(f)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for f, _ in files]
    outs = [proc.communicate(timeout=300) for proc in procs]
    codes = [proc.returncode for proc in procs]
    assert sorted(codes) in ([0, 0], [0, 2]), outs
    stored = _stored(a)
    assert stored == set().union(*(ids for (_, ids), c in zip(files, codes) if c == 0))
    for (_, err), code in zip(outs, codes):
        if code:
            assert "nothing was stored" in err and "Traceback" not in err
    labels = json.loads((a / "metrics.json").read_text())["ppi"]["metrics"]["correctness"]
    assert labels["labels"]["usable"] == len(stored)
    assert labels["overall"]["n_labelled"] == len(stored)
