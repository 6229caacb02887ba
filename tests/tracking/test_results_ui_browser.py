"""The sweep's printed address, opened in MLflow's UI by a real (headless) Chromium: every
job listed (sorted best first, not one collapsed parent row), on the chart view; and the
parent run's page: the "best" line in its description, each job's figures against job 0.
Screenshots are kept in the test's temporary folder (``tmp_path/screens``)."""

from __future__ import annotations

import json
import re
import shutil
import time

import pytest

from tests.browser import CHROMIUM, Browser
from tests.conftest import run_cli
from tests.tracking.services import mlflow_server
from tests.tracking.test_traces_browser import CLOSE_PANELS

#: type a text into the run page's metric search box (React reads the input event)
FILTER = ("(text => { const i = document.querySelector('input[placeholder=\"Search metrics\"]');"
          " Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set"
          ".call(i, text); i.dispatchEvent(new Event('input', {bubbles: true})); })(%s)")


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
        # the parent's page: its description and the end-of-sweep comparison's figures
        parent = re.search(r"MLflow parent run ([0-9a-f]{32})", proc.stdout).group(1)
        exp_id = re.search(r"#/experiments/(\d+)/", view_path).group(1)
        b.open(f"{base}/#/experiments/{exp_id}/runs/{parent}?workflowType=machine_learning")
        b.wait_for_text("Metrics (", "sweep.1.", "sweep k=1,2", "2 jobs in", timeout=120)
        b.evaluate(FILTER % json.dumps("final.evidence_recall"))
        time.sleep(2)
        b.evaluate(CLOSE_PANELS)
        text = b.wait_for_text("sweep.1.final.evidence_recall.delta", timeout=30)
        b.screenshot(screens / "sweep-parent.png")
        best = next((ln for ln in proc.stdout.splitlines() if ln.startswith("best ")), None)
        if best is not None:  # the jobs differ: the line, its test against the runner-up
            assert best.split("; ")[1].split(":")[0] in text
        for fig in ("delta", "ci_low", "ci_high"):
            assert f"sweep.1.final.evidence_recall.{fig}" in text
        assert "sweep.1.final.ndcg.delta" not in text  # the metrics table is filtered
    assert (screens / "sweep-jobs-charts.png").stat().st_size > 10_000
    assert (screens / "sweep-parent.png").stat().st_size > 10_000
    print(f"screenshots: {screens}")
