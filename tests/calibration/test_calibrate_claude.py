"""``raglab calibrate grader=claude repeats=3`` against the local fake Messages API, and a
prompt word changed: "uncalibrated" until re-checked."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path

import pytest

from raglab.data.dataset import resolve_path
from tests.conftest import run_cli
from tests.graders.fake_anthropic import TEST_KEY, FakeAnthropic, fake_model
from tests.graders.test_run_claude import _env, _subset

PROMPTS = resolve_path("pkg://raglab/graders/prompts")


def noisy_model():
    """The deterministic fake grader model, except that every 4th verification or nugget
    request flips its first label: repeats of one request then disagree now and then."""
    counter = itertools.count()
    lock = threading.Lock()

    def handler(body):
        text = fake_model(body)
        out = json.loads(text) if text.startswith("{") else None
        if not out or not ({"verdicts", "judgments"} & set(out)):
            return text
        with lock:
            n = next(counter)
        if n % 4 == 3:
            items = out.get("verdicts") or out.get("judgments")
            flip = {"SUPPORTED": "CONTRADICTED", "NOT_FOUND": "SUPPORTED",
                    "CONTRADICTED": "NOT_FOUND", "YES": "NO", "PARTIAL": "YES", "NO": "PARTIAL"}
            items[0]["label"] = flip[items[0]["label"]]
        return json.dumps(out)

    return handler


def _labels(tmp: Path) -> Path:
    rows = [json.loads(x) for x in
            resolve_path("pkg://raglab/datasets/demo/labels.jsonl").read_text().splitlines()]
    pick = [r for r in rows if r["kind"] == "claim"][:40] + \
        [r for r in rows if r["kind"] == "nugget"][:24]
    path = tmp / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in pick))
    return path


def _versions_block(stdout: str) -> dict[str, str]:
    lines = stdout.split("metric versions (calibration):\n", 1)[1].splitlines()
    return {ln.split()[0]: ln.split(None, 2)[2] for ln in lines if ln.startswith("    ")}


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_claude_grader_repeats_and_prompt_change(tmp_path):
    labels = _labels(tmp_path)
    cache = tmp_path / "cache"
    with FakeAnthropic(handler=noisy_model()) as srv:
        env = _env(srv.url, TEST_KEY)
        cal = ["calibrate", "grader=claude", "repeats=3", f"dataset.labels={labels}",
               f"cache_dir={cache}", "tracking=none"]
        p = run_cli(*cal, f"hydra.run.dir={tmp_path / 'cal'}", cwd=tmp_path, env=env)
        assert p.returncode == 0, p.stderr[-3000:]
        doc = json.loads((tmp_path / "cal" / "calibration.json").read_text())
        sent = len(srv.calls("/v1/messages"))
        assert sent == doc["work"]["grader_calls"] > 0
        assert sent % 3 == 0  # every judgment asked three times, none answered by another's cache
        sc = doc["self_consistency"]
        assert sc["independent"] == 3
        assert 0 < sc["claims"]["all_agree"] < 1 and sc["claims"]["fleiss_kappa"] < 1
        assert all(len(i["repeats"]) == 3 for i in doc["items"])
        assert "self-consistency over 3 repeats" in p.stdout and "Fleiss kappa" in p.stdout
        for sec in ("claims", "nuggets"):
            assert doc[sec]["kappa"] is not None and doc[sec]["ci_low"] <= doc[sec]["ci_high"]
        assert "claims confusion" in p.stdout and "nuggets confusion" in p.stdout

        # the same calibration again: every judgment from the cache, no request
        p = run_cli(*cal, f"hydra.run.dir={tmp_path / 'cal2'}", cwd=tmp_path, env=env)
        assert p.returncode == 0, p.stderr[-3000:]
        assert len(srv.calls("/v1/messages")) == sent

        cases = _subset(tmp_path, 2, 1)
        run = ["run", "grader=claude", "tracking=none", f"cache_dir={cache}",
               f"dataset.cases={cases}", "progress=off"]
        # a run of the calibrated grader, with repeats: kappa next to the versions
        p = run_cli(*run, "grader.repeats=3", f"hydra.run.dir={tmp_path / 'run'}",
                    cwd=tmp_path, env=env)
        assert p.returncode == 0, p.stderr[-3000:]
        shown = _versions_block(p.stdout)
        assert shown["faithfulness"].startswith(f"kappa {doc['claims']['kappa']:.2f}")
        assert shown["nuggets"].startswith(f"kappa {doc['nuggets']['kappa']:.2f}")
        recs = [json.loads(x)
                for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
        graded = [r for r in recs if r["graded"]]
        assert graded and all(len(r["repeat_verdicts"]) == 2 for r in graded)
        assert all("faithfulness" in r["repeat_variance"] for r in graded
                   if r["metrics"]["faithfulness"] is not None)

        # one word of the verification prompt changed: a new version, uncalibrated
        changed = tmp_path / "prompts"
        changed.mkdir()
        for f in PROMPTS.glob("*.txt"):
            (changed / f.name).write_text(f.read_text())
        verify = (changed / "verify.txt").read_text()
        word = next(w for w in verify.split() if w.isalpha() and len(w) > 4)
        (changed / "verify.txt").write_text(verify.replace(word, word + "s", 1))
        p = run_cli(*run, f"grader.prompts={changed}", f"hydra.run.dir={tmp_path / 'run2'}",
                    cwd=tmp_path, env=env)
        assert p.returncode == 0, p.stderr[-3000:]
        shown2 = _versions_block(p.stdout)
        assert shown2["faithfulness"] == "uncalibrated"
        assert shown2["nuggets"] == shown["nuggets"]  # its prompt did not change
