"""MLflow's own views of raglab's traces, rendered by a real (headless) Chromium: the cases
of a run in its evaluation view (the run page's Traces tab), two runs compared case by
case there, the experiment's evaluation runs, and the runs table with raglab's headline
view, all of the same runs. Screenshots are kept in ``tmp_path/screens``."""

from __future__ import annotations

import re
import shutil
import time

import pytest

from tests.browser import CHROMIUM, Browser
from tests.conftest import run_cli
from tests.tracking.services import mlflow_server

# the assistant side panel MLflow opens by default (it would cover half of each view)
CLOSE_PANELS = ("Array.from(document.querySelectorAll('button'))"
                ".filter(x => /close/i.test(x.getAttribute('aria-label') || ''))"
                ".forEach(x => x.click())")


def _open(b: Browser, url: str, *needles: str, timeout: float = 120) -> str:
    b.open(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # the panel opens once the page is loaded
        time.sleep(1)
        b.evaluate(CLOSE_PANELS)
        text = b.text()
        if all(n in text for n in needles) and "Loading..." not in text:
            break
    text = b.wait_for_text(*needles, timeout=5)
    time.sleep(2)
    return text


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which(CHROMIUM), reason="chromium is not installed")
def test_mlflow_shows_the_cases_of_a_run_and_compares_two_runs_case_by_case(tmp_path, tiny):
    corpus, cases = tiny
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli("run", "-m", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                   "dataset.labels=null", "grader=heuristic", "k=1,3", "candidate_depth=5",
                   f"tracking.uri={uri}", f"hydra.sweep.dir={tmp_path / 'sweep'}",
                   f"cache_dir={tmp_path / 'c'}", "progress=off", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    parent_id = re.search(r"MLflow parent run ([0-9a-f]{32})", proc.stdout).group(1)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp_id = client.get_run(parent_id).info.experiment_id
    runs = {r.info.run_name: r.info.run_id for r in client.search_runs([exp_id])
            if r.data.tags.get("mlflow.parentRunId") == parent_id}
    k3, k1 = runs["k=3"], runs["k=1"]
    screens = tmp_path / "screens"
    screens.mkdir()
    cases_ids = ("t-1", "t-2", "t-3", "t-4")
    with mlflow_server(uri, tmp_path / "server") as base, \
            Browser(tmp_path / "chromium-profile", width=1920, height=1080) as b:
        # the cases of one run: a row per case, its expectations and its feedback
        text = _open(b, f"{base}/#/experiments/{exp_id}/runs/{k3}/traces?workflowType=genai",
                     "Expectations", "Assessments", "4 of 4", *cases_ids)
        b.screenshot(screens / "traces-run.png")
        for column in ("Expected output", "Expected facts", "acl_leak_rate"):
            assert column in text
        assert "compare to" in text

        # the same run compared with another, case by case (paired on the request)
        text = _open(b, f"{base}/#/experiments/{exp_id}/runs/{k3}/traces?workflowType=genai"
                     f"&compareToRunUuid={k1}", "k=1", "k=3", *cases_ids)
        b.screenshot(screens / "traces-compare.png")
        for case_id in cases_ids:  # each case once: its two runs side by side
            assert text.count(f'"case_id": "{case_id}"') == 1, case_id

        # the experiment's evaluation runs: raglab's runs, type Eval
        text = _open(b, f"{base}/#/experiments/{exp_id}/evaluation-runs?workflowType=genai",
                     "Evaluation runs", "Eval", "k=1")
        b.screenshot(screens / "evaluation-runs.png")

        # and the runs table with raglab's headline view, as before
        text = _open(b, f"{base}/#/experiments/{exp_id}/runs?workflowType=machine_learning"
                     "&viewStateShareKey=raglab-headline", "raglab: headline metrics",
                     "candidate.evidence_recall", "k sweep")
        b.screenshot(screens / "runs-table.png")
    assert all(p.stat().st_size > 10_000 for p in screens.iterdir())
    print(f"screenshots: {screens}")
