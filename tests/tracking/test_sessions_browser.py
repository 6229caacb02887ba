"""MLflow's sessions of a conversation run, rendered by a real (headless) Chromium: the
experiment's traces grouped by session (MLflow 3.17 moved its Sessions view there), one
group per conversation, and one conversation's page with its turns in order. Screenshots are kept in
``tmp_path/screens`` (docs/img/mlflow-sessions.png is the first)."""

from __future__ import annotations

import re
import shutil

import pytest

from tests.browser import CHROMIUM, Browser
from tests.tracking.services import mlflow_server
from tests.tracking.test_conversation_traces import conversation_run
from tests.tracking.test_traces_browser import _open


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which(CHROMIUM), reason="chromium is not installed")
def test_mlflow_shows_each_conversation_as_a_session(tmp_path):
    uri, exp = conversation_run(tmp_path)
    screens = tmp_path / "screens"
    screens.mkdir()
    with mlflow_server(uri, tmp_path / "server") as base, \
            Browser(tmp_path / "chromium-profile", width=1600, height=900) as b:
        text = _open(b, f"{base}/#/experiments/{exp}/traces?groupBy=session", "conv-1",
                     "conv-2", "conv-3")
        b.screenshot(screens / "mlflow-sessions.png")
        text = _open(b, f"{base}/#/experiments/{exp}/chat-sessions/conv-1", "Turn 3",
                     "conv-1.t1", "conv-1.t2", "conv-1.t3")
        b.screenshot(screens / "mlflow-session.png")
        # each turn's card in turn order: Turn K, then its case id
        assert re.findall(r"Turn \d|conv-1\.t\d", text)[-6:] == [
            "Turn 1", "conv-1.t1", "Turn 2", "conv-1.t2", "Turn 3", "conv-1.t3"]
    assert all(p.stat().st_size > 10_000 for p in screens.iterdir())
    print(f"screenshots: {screens}")
