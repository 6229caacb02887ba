"""MLflow's own views of raglab's traces, rendered by a real (headless) Chromium: the cases
of a run in its evaluation view (the run page's Traces tab), two runs compared case by
case there, the experiment's evaluation runs, and the runs table with raglab's headline
view, all of the same runs. Screenshots are kept in ``tmp_path/screens``."""

from __future__ import annotations

import json
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


#: click the Columns menu's options of these names (a JSON list)
PICK = ("(names => names.forEach(n => Array.from(document.querySelectorAll('[role=option]'))"
        ".filter(x => x.textContent.trim() === n).forEach(x => x.click())))(%s)")


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

    import mlflow
    from mlflow.entities import AssessmentSource
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
                     "candidate.evidence_recall", "sweep k=1,3")
        b.screenshot(screens / "runs-table.png")
        # raglab's correctness beside a control feedback named "correctness" with the same
        # values: MLflow's UI takes that name for its own pass/fail judge and shows the
        # numbers as text, so raglab logs it as raglab.correctness (docs/mlflow.md)
        mlflow.set_tracking_uri(uri)
        for t in mlflow.search_traces(locations=[exp_id], run_id=k3, return_type="list"):
            for a in t.info.assessments:
                if a.name == "raglab.correctness":
                    mlflow.log_feedback(trace_id=t.info.trace_id, name="correctness",
                                        value=a.value, source=AssessmentSource(
                                            source_type="CODE", source_id="control"))
        _open(b, f"{base}/#/experiments/{exp_id}/runs/{k3}/traces?workflowType=genai",
              "Assessments", "4 of 4")
        b.evaluate("Array.from(document.querySelectorAll('button'))"
                   ".find(x => /Columns/.test(x.textContent)).click()")
        b.wait_for_text("raglab.correctness", timeout=30)
        b.evaluate(PICK % json.dumps(["raglab.correctness", "correctness"]))
        b.evaluate("document.dispatchEvent(new KeyboardEvent('keydown', "
                   "{key: 'Escape', bubbles: true})); document.body.click()")
        text = b.wait_for_text("Correctness\nSTRING", timeout=30)
        time.sleep(2)
        b.screenshot(screens / "correctness.png")
        assert re.search(r"raglab\.correctness\nAVG\n[0-9.]+\n", text), text[:2000]
        assert re.search(r"Correctness\nSTRING\n\d+ values?\n", text), text[:2000]
    assert all(p.stat().st_size > 10_000 for p in screens.iterdir())
    print(f"screenshots: {screens}")
