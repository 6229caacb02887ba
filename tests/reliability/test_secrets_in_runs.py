"""Issue 24, defects 1-3 and 15, reproduced with real runs (subprocesses against a local HTTP
system): an ordinary header value must not wreck the run directory, a secret the system
echoes must reach no file (the stage cache included), no part of a secret may survive
because an error text was cut before it was scrubbed, and a sweep's multirun.yaml keeps no
header secret."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import run_cli

TOKEN = "sk-live-" + "Q7b2Xw9KpL4mZ8rT3vN6yH1cF5dJ0sGe" + "Ua2Wq8Eo4Ri6Ty1Pl9Mk"  # 62 characters
BASE = ["tracking=none", "metrics.cutoffs=[1,3,5]", "k=3", "candidate_depth=5",
        "grader=heuristic", "system=http", "system.retries=0", "system.backoff_s=0.01",
        "dataset.labels=null", "+system.headers.X-Tenant=case",
        f"+system.headers.Authorization=Bearer {TOKEN}"]


class _Echo(BaseHTTPRequestHandler):
    """t-1 and t-4: an answer echoing the Authorization header; t-2: a malformed body with
    the token at a place a 120-character cut splits; t-3: a wrong type around the token
    (pydantic's message keeps a part of a long input)."""

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cid = body["case_id"]
        auth = self.headers["Authorization"]
        assert self.headers["X-Tenant"] == "case"  # the value reaches the system as given
        if cid == "t-2":
            data = ('{"answer": "' + "x" * 88 + " " + auth + " and more").encode()
        elif cid == "t-3":
            data = json.dumps({"answer": {"text": f"echo {auth}"}}).encode()
        else:
            data = json.dumps({"candidates": [{"doc_id": "kb/a", "text": ""}], "context": [],
                               "answer": f"Within 5 business days; you sent {auth}."}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def system_url():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/answer"
    srv.shutdown()
    srv.server_close()


def _fragments() -> list[str]:
    """Every 10-character piece of the token: none may be left anywhere."""
    return [TOKEN[i:i + 10] for i in range(0, len(TOKEN) - 9)]


def _leaks(root: Path) -> list[tuple[str, str]]:
    found = []
    for f in root.rglob("*"):
        if f.is_file():
            data = f.read_bytes().decode("utf-8", "replace")
            found += [(str(f), piece) for piece in _fragments() if piece in data]
    return found


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
def test_an_ordinary_header_value_keeps_the_run_directory_whole_and_secrets_stay_out(
        tiny, tmp_path, system_url):
    corpus, cases = tiny
    cache = tmp_path / "cache"
    args = [*BASE, f"system.url={system_url}", f"dataset.corpus={corpus}",
            f"dataset.cases={cases}", f"cache_dir={cache}"]
    out = tmp_path / "run"
    proc = run_cli("run", *args, f"hydra.run.dir={out}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # defect 1: keys, paths and figures are whole ("case" is no secret: X-Tenant is an
    # ordinary header name and "case" a word)
    lines = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert sorted(r["case_id"] for r in lines) == ["t-1", "t-2", "t-3", "t-4"]
    assert all("***" not in key for r in lines for key in r)
    saved = (out / "config.yaml").read_text()
    assert f"cases: {cases}" in saved and "X-Tenant: case" in saved
    assert "Authorization: '***'" in saved
    assert json.loads((out / "metrics.json").read_text())["n_cases"] == 4
    recs = {r["case_id"]: r for r in lines}
    assert "***" in recs["t-1"]["output"]["answer"]  # the echoed token, scrubbed
    # defect 3: the error texts are scrubbed, then cut; no piece of the token is left
    assert "malformed JSON" in recs["t-2"]["error"]
    assert "answer" in recs["t-3"]["error"] and "string" in recs["t-3"]["error"]
    # defect 2: the stage cache (grader responses of the echoed answer) holds no secret
    assert (cache / "stages.sqlite").exists()
    assert _leaks(cache) == [] and _leaks(out) == []
    assert not [p for p in _fragments() if p in proc.stdout + proc.stderr]

    # the same command again resumes (nothing to do) instead of refusing the directory
    again = run_cli("run", *args, f"hydra.run.dir={out}", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "different configuration" not in again.stderr
    # a second run, then compare reads both directories
    out2 = tmp_path / "run2"
    second = run_cli("run", *args, f"hydra.run.dir={out2}", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    cmp = run_cli("compare", str(out), str(out2), "--out", str(tmp_path / "cmp"), cwd=tmp_path)
    assert cmp.returncode == 0, cmp.stderr
    assert (tmp_path / "cmp" / "compare.json").exists()
    assert _leaks(tmp_path) == []


def test_a_secret_stored_in_the_stage_cache_is_scrubbed_but_keys_stay_apart(tmp_path,
                                                                           monkeypatch):
    """Two values that differ only in their secret keep two entries (the key is the
    caller's, from the unscrubbed text); what is stored holds ``***``."""
    import sqlite3

    import raglab.secrets
    from raglab.cache import StageCache, content_key
    from raglab.secrets import Scrubber

    monkeypatch.setattr(raglab.secrets, "SCRUBBER", Scrubber({TOKEN}, environment=False))
    cache = StageCache(tmp_path / "c")
    a, b = f"answer {TOKEN}", "answer ***"
    cache.put("grade", content_key(a), {"claims": [a], "n": 3, "case_id": "x"})
    cache.put("grade", content_key(b), {"claims": [b], "n": 4, "case_id": "x"})
    assert cache.get("grade", content_key(a)) == {"claims": ["answer ***"], "n": 3,
                                                 "case_id": "x"}
    assert cache.get("grade", content_key(b))["n"] == 4
    cache.close()
    rows = sqlite3.connect(tmp_path / "c" / "stages.sqlite").execute(
        "SELECT value FROM kv").fetchall()
    assert len(rows) == 2 and not any(TOKEN in v for (v,) in rows)


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
def test_a_sweep_keeps_no_header_secret_in_multirun_yaml_or_hydra_files(tiny, tmp_path,
                                                                         system_url):
    corpus, cases = tiny
    sweep = tmp_path / "sweep"
    proc = run_cli("run", "-m", *BASE, f"system.url={system_url}", f"dataset.corpus={corpus}",
                   f"dataset.cases={cases}", f"cache_dir={tmp_path / 'cache'}", "k=2,3",
                   f"hydra.sweep.dir={sweep}", "hydra.output_subdir=.hydra", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # each job's .hydra/ files (asked for with hydra.output_subdir) hold no secret either
    assert "X-Tenant=case" in (sweep / "1" / ".hydra" / "overrides.yaml").read_text()
    written = (sweep / "multirun.yaml").read_text()
    assert "X-Tenant=case" in written  # the sweep's overrides are still readable
    assert "Authorization=***" in written
    assert _leaks(tmp_path) == []
    # compare still names the jobs from multirun.yaml
    cmp = run_cli("compare", str(sweep), "--baseline", "0", "--out", str(tmp_path / "cmp"),
                  cwd=tmp_path)
    assert cmp.returncode == 0, cmp.stderr
