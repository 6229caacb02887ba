"""MLflow's UI, rendered by a real (headless) Chromium, on a run graded by a model behind a
stand-in server: the case that leaked shows ``False`` and ``Error`` (never a green "OK"),
and its trace shows the judge's calls as spans. Screenshots are kept in
``tmp_path/screens``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time

import pytest

from tests.browser import CHROMIUM, Browser
from tests.graders.fake_anthropic import TEST_KEY, FakeAnthropic, fake_model
from tests.graders.test_run_claude import _env
from tests.runner.test_resume_refuses_other_versions import _tiny
from tests.tracking.services import mlflow_server
from tests.tracking.test_traces_browser import _open

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which(CHROMIUM), reason="chromium is not installed")
def test_mlflow_shows_a_leak_failed_and_the_judge_calls_of_a_case(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with FakeAnthropic(handler=fake_model) as srv:
        p = subprocess.run([sys.executable, "-m", "raglab.cli", "run", *_tiny(tmp_path),
                            "progress=off", "grader=claude", "system.enforce_acl=false",
                            f"tracking.uri={uri}", f"cache_dir={tmp_path / 'cache'}",
                            f"hydra.run.dir={tmp_path / 'r'}"], env=_env(srv.url, TEST_KEY),
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    import mlflow

    mlflow.set_tracking_uri(uri)
    exp = mlflow.get_experiment_by_name("raglab")
    (run,) = mlflow.search_runs([exp.experiment_id], output_format="list")
    traces = {t.info.tags["raglab.case_id"]: t.info.trace_id for t in mlflow.search_traces(
        locations=[exp.experiment_id], run_id=run.info.run_id, return_type="list")}
    screens = tmp_path / "screens"
    screens.mkdir()
    with mlflow_server(uri, tmp_path / "server") as base, \
            Browser(tmp_path / "chromium-profile", width=1920, height=1080) as b:
        url = (f"{base}/#/experiments/{exp.experiment_id}/runs/{run.info.run_id}/traces"
               "?workflowType=genai")
        text = _open(b, url, "4 of 4", "t-3", "acl_leak_rate")
        b.screenshot(screens / "cases.png")
        # t-3 leaked: False and Error; the three others passed: True and OK (each row's
        # text runs from its request to the next row's)
        rows = re.split(r'\n(?=tr-[0-9a-f]{32}\n)', text)
        for cid in ("t-1", "t-2", "t-3", "t-4"):
            (row,) = [r for r in rows if f'"case_id": "{cid}"' in r]
            cells = row.splitlines()
            want = ("False", "Error") if cid == "t-3" else ("True", "OK")
            assert want[0] in cells and want[1] in cells, (cid, cells)
        # the leaking case's trace: its judge calls under grade, with model and tokens
        b.evaluate("Array.from(document.querySelectorAll('*')).filter(x => !x.children.length"
                   f" && x.textContent.startsWith('{traces['t-3'][:10]}')).forEach(x => "
                   "x.click())")
        text = b.wait_for_text("grade", "judge faithfulness", timeout=60)
        time.sleep(2)
        b.screenshot(screens / "trace.png")
        assert "Error" in text and "Success" not in text
        assert "claude-sonnet-4-6" not in text or "tokens" in text
    assert all(p.stat().st_size > 10_000 for p in screens.iterdir())
    print(f"screenshots: {screens}")
