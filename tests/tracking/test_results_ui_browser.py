"""The sweep's printed address, opened in MLflow's UI by a real (headless) Chromium: every
job listed (sorted best first, not one collapsed parent row), on the chart view.
Screenshots are kept in the test's temporary folder (``tmp_path/screens``)."""

from __future__ import annotations

import re
import shutil
import time

import pytest

from tests.browser import CHROMIUM, Browser
from tests.conftest import run_cli
from tests.tracking.services import mlflow_server


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which(CHROMIUM), reason="chromium is not installed")
def test_the_sweep_address_opens_on_every_job_and_the_chart_view(tmp_path, tiny):
    corpus, cases = tiny
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli("run", "-m", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                   "dataset.labels=null", "k=1,2", "candidate_depth=5", f"tracking.uri={uri}",
                   f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    view_path = re.search(r"then open http://[^/]+/(#/experiments/\S+)", proc.stdout).group(1)
    assert view_path.endswith("&compareRunsMode=CHART")
    screens = tmp_path / "screens"
    screens.mkdir()
    with mlflow_server(uri, tmp_path / "server") as base, \
            Browser(tmp_path / "chromium-profile", width=1920, height=1080) as b:
        b.open(f"{base}/{view_path}")
        text = b.wait_for_text("k=1", "k=2", "raglab headline", "final.evidence_recall")
        time.sleep(2)
        text = b.text()
        b.screenshot(screens / "sweep-jobs-charts.png")
        # every job listed (not one collapsed parent), and the section's charts drawn
        assert "k=1" in text and "k=2" in text and "raglab headline" in text
        assert "No charts in this section" not in text
        assert "final.evidence_recall" in text[text.index("raglab headline"):]
    assert (screens / "sweep-jobs-charts.png").stat().st_size > 10_000
    print(f"screenshots: {screens}")
