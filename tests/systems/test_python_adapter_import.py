"""``system=python`` finds the user's module in the working directory as ``python -m``
does, with the installed ``raglab`` script too; a module it cannot find, or an option given
without its ``+``, fails with one line that says what to do."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SYSTEM = '''
def make(options):
    class Echo:
        def answer(self, request):
            return {"case_id": request.case_id, "answer": "greeting " + str(options["word"])}
    return Echo()
'''


def _script() -> str:
    found = shutil.which("raglab", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("the raglab script is not installed beside this Python (pip install -e .)")
    return found


def _run(tmp_path: Path, tiny, *extra: str) -> subprocess.CompletedProcess:
    corpus, cases = tiny
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    return subprocess.run(
        [_script(), "run", "system=python", f"dataset.corpus={corpus}",
         f"dataset.cases={cases}", "dataset.labels=null", "tracking=none", "grader=none",
         "progress=off", f"cache_dir={tmp_path / 'cache'}", *extra],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_the_module_in_the_working_directory_is_found_by_the_installed_script(tmp_path, tiny):
    (tmp_path / "my_echo.py").write_text(SYSTEM, encoding="utf-8")
    proc = _run(tmp_path, tiny, "system._target_=my_echo.make", "+system.options.word=hi",
                f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text()
               .splitlines()]
    assert records and all(r["output"]["answer"] == "greeting hi" for r in records)


def test_a_module_nowhere_to_be_found_says_where_it_was_looked_for(tmp_path, tiny):
    proc = _run(tmp_path, tiny, "system._target_=no_such_module_here.make",
                f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 2
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, proc.stderr
    assert "cannot import 'no_such_module_here'" in lines[0]
    assert f"working directory {tmp_path}" in lines[0] and "PYTHONPATH" in lines[0]
    assert not (tmp_path / "run" / "records.jsonl").exists()


def test_an_option_without_its_plus_is_told_to_take_one(tmp_path, tiny):
    (tmp_path / "my_echo.py").write_text(SYSTEM, encoding="utf-8")
    proc = _run(tmp_path, tiny, "system._target_=my_echo.make", "system.options.word=hi",
                f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "raglab: error: config system.options.word: unknown key (system.options starts "
        "empty: add a key with +system.options.word=VALUE)")
    assert not (tmp_path / "run").exists()


def test_a_run_stopped_before_it_wrote_anything_leaves_no_directory(tmp_path, tiny):
    """A missing cases file is found after the run took its directory's lock: the directory,
    holding only that lock, goes (a single run is composed and checked inside Hydra's job)."""
    (tmp_path / "my_echo.py").write_text(SYSTEM, encoding="utf-8")
    proc = _run(tmp_path, tiny, "system._target_=my_echo.make", "+system.options.word=hi",
                f"dataset.cases={tmp_path / 'missing.jsonl'}", f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 2
    assert "missing.jsonl" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()
