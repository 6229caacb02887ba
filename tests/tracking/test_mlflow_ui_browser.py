"""MLflow's UI, rendered by a real (headless) Chromium over a small sweep: the experiment's
saved headline view, a child's page opening with its headline, the parent's job table, and
report.html in the artifact viewer, without console errors. Screenshots are kept in the
test's temporary folder (``tmp_path/screens``)."""

from __future__ import annotations

import re
import shutil
import time

import pytest

from tests.browser import CHROMIUM, Browser
from tests.conftest import run_cli
from tests.tracking.services import mlflow_server

#: console errors of MLflow's own UI that no logged data can cause: the UI asks for the
#: signed-in user, an endpoint that exists only with MLflow's auth app
MLFLOW_OWN = (re.compile(r"/ajax-api/2\.0/mlflow/users/current\b"),)


def _own_errors(errors: list[str]) -> list[str]:
    return [e for e in errors if not any(p.search(e) for p in MLFLOW_OWN)]


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which(CHROMIUM), reason="chromium is not installed")
def test_the_ui_leads_with_the_headline(tmp_path, tiny):
    corpus, cases = tiny
    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    sweep = tmp_path / "sweep"
    proc = run_cli("run", "-m", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                   "dataset.labels=null", "k=1,2", "candidate_depth=5", f"tracking.uri={uri}",
                   f"hydra.sweep.dir={sweep}", f"cache_dir={tmp_path / 'c'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    parent_id = re.search(r"MLflow parent run ([0-9a-f]{32})", proc.stdout).group(1)
    view_path = re.search(r"then open http://[^/]+/(#/experiments/\S+)", proc.stdout).group(1)
    # the view's table (the printed address opens its charts: test_results_ui_browser.py)
    view_path = view_path.replace("&compareRunsMode=CHART", "")

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp_id = client.get_run(parent_id).info.experiment_id
    child = next(r for r in client.search_runs([exp_id])
                 if r.data.tags.get("mlflow.parentRunId") == parent_id
                 and r.info.run_name == "k=1")
    screens = tmp_path / "screens"
    screens.mkdir()
    with mlflow_server(uri, tmp_path / "server") as base, \
            Browser(tmp_path / "chromium-profile", width=1920, height=1080) as b:
        # the sweep's saved view: the runs table on the swept param and headline metrics
        b.open(f"{base}/{view_path}")
        text = b.wait_for_text("raglab: sweep k=1,2", "Parameters", "candidate.evidence_recall")
        time.sleep(1)
        b.screenshot(screens / "1-experiment-view.png")
        assert "Training runs" in text  # the classic layout, not GenAI evaluations
        # the swept param first, then the headline metrics in the catalog's order
        cols = text[text.index("Run Name"):]
        assert cols.index("Parameters") < cols.index("candidate.evidence_recall") \
            < cols.index("final.evidence_recall")

        # a child run opens with its description: name, headline table, config changes
        b.open(f"{base}/#/experiments/{exp_id}/runs/{child.info.run_id}")
        text = b.wait_for_text("headline metric", "Config differences from the defaults")
        time.sleep(1)
        b.screenshot(screens / "2-child-run.png")
        assert re.search(r"k=1: dataset \S+, 4 cases", text)
        assert re.search(r"final\.evidence_recall\s+[0-9.]+\s+↑", text)
        assert "acl_leak_rate" in text and "k 5 → 1" in text
        assert text.index("headline metric") < text.index("Metrics (")  # before the 2,000
        # the headline figures are in the lines shown before "Show more"
        assert text.index("final.evidence_recall") < text.index("Show more")

        # the parent run: the job table as its description
        b.open(f"{base}/#/experiments/{exp_id}/runs/{parent_id}")
        text = b.wait_for_text("2 jobs in", "final.evidence_recall ↑")
        time.sleep(1)
        b.screenshot(screens / "3-parent-run.png")
        assert re.search(r"^job\s+0\s+1$", text, re.M) and re.search(r"^k\s+1\s+2$", text, re.M)
        assert re.search(r"^final\.evidence_recall ↑\s+[0-9.]+\s+[0-9.]+$", text, re.M)

        # report.html in the artifact viewer: the whole report, plots included
        b.open(f"{base}/#/experiments/{exp_id}/runs/{child.info.run_id}"
               "/artifacts/report/report.html")
        deadline = time.monotonic() + 45
        frames: list[str] = []
        while time.monotonic() < deadline and not any("Headline metrics" in f for f in frames):
            time.sleep(0.5)
            frames = b.frame_texts()
        time.sleep(1)
        b.screenshot(screens / "4-report-html.png")
        report = next((f for f in frames if "Headline metrics" in f), "")
        assert report.startswith("k=1\n") and "Configuration" in report, frames
        assert report.index("Configuration") < report.index("Headline metrics")
        assert "Slices" in report

        # the sweep's job table as an artifact of the parent
        b.open(f"{base}/#/experiments/{exp_id}/runs/{parent_id}/artifacts/sweep.html")
        deadline = time.monotonic() + 45
        frames = []
        while time.monotonic() < deadline and not any("2 jobs in" in f for f in frames):
            time.sleep(0.5)
            frames = b.frame_texts()
        b.screenshot(screens / "5-sweep-html.png")
        assert any(f.startswith("sweep k=1,2 ") for f in frames), frames
        errors = _own_errors(b.console_errors)
    assert not errors, errors
    assert all((screens / n).stat().st_size > 10_000 for n in (
        "1-experiment-view.png", "2-child-run.png", "3-parent-run.png", "4-report-html.png"))
    print(f"screenshots: {screens}")
