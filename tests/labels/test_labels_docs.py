"""The worked example of docs/labels.md runs exactly as written (the demo, twice, then
raglab label), in a fresh directory; the person at the terminal sessions answers yes
to the first 40 rows (keys read from a pipe), then the input ends (a quit)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGE = REPO / "docs" / "labels.md"


def _example_blocks() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("\n## A worked example on the demo\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```bash\n(.*?)^```$", section, re.S | re.M)


@pytest.mark.slow
def test_the_worked_example_runs_as_written(tmp_path):
    blocks = _example_blocks()
    assert len(blocks) == 5 and "--plan" in blocks[3] and "compare" in blocks[4]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = str(REPO)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    out = {}
    for i, block in enumerate(blocks):
        p = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=900,
                           input="y\n" * 40)
        assert p.returncode == 0, f"{block}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
        out[i] = p.stdout
    section = json.loads((tmp_path / "runs/base/metrics.json").read_text())["ppi"]
    assert section["sample"]["seed"] == 7
    faith = section["metrics"]["faithfulness"]
    assert faith["labels"]["usable"] >= 10 and faith["overall"]["n_labelled"] >= 10
    assert section["metrics"]["correctness"]["labels"]["usable"] >= 10
    assert "labels for an interval 0.1 wide" in out[3]  # --plan
    compared = json.loads(next((tmp_path / "runs").glob("compare-*/compare.json")).read_text())
    assert "faithfulness" in compared["ppi"]["metrics"]
