"""``raglab monitor`` end to end (real subprocesses, the offline grader, synthetic traffic)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from raglab.monitor.traffic import TrafficLine, sampled
from tests.conftest import run_cli
from tests.monitor.traffic import traffic_lines, write_traffic


def _monitor(tmp_path, name, *args):
    return run_cli("monitor", *args, f"cache_dir={tmp_path / 'cache'}",
                   f"hydra.run.dir={tmp_path / name}", cwd=tmp_path)


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_unshifted_traffic_exits_0_and_shifted_raises_drift(tmp_path):
    base = write_traffic(tmp_path / "base.jsonl", traffic_lines(300, 1), bad=False)
    same = write_traffic(tmp_path / "same.jsonl", traffic_lines(300, 2))
    p = _monitor(tmp_path, "m1", str(same), "--baseline", str(base), "tracking=none")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "0 alert(s)" in p.stdout and "bad traffic lines: 2" in p.stdout
    doc = json.loads((tmp_path / "m1" / "monitor.json").read_text())
    assert doc["lines"] == 300 and doc["bad_lines"] == 2 and len(doc["windows"]) == 2
    assert json.loads((tmp_path / "m1" / "alerts.json").read_text()) == []
    w = doc["windows"][0]
    assert w["lines"] == 150 and w["top1_score.n"] == 150  # retrieval stats: every line
    assert 0 < w["sampled"] < 30  # judged: the 5% sample
    assert w["drift.ks_d"] is not None and w["drift.ks_d"] < 0.2

    shifted = write_traffic(tmp_path / "shift.jsonl", traffic_lines(300, 3, shift=2.0))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    p = _monitor(tmp_path, "m2", str(shifted), "--baseline", str(base), f"tracking.uri={uri}")
    assert p.returncode == 1, p.stdout + p.stderr
    alerts = json.loads((tmp_path / "m2" / "alerts.json").read_text())
    assert {a["kind"] for a in alerts} == {"retrieval_score_drift"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("ALERT ")]
    assert len(lines) == len(alerts) and "top-1 retrieval scores shifted" in lines[0]

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("raglab-monitor").experiment_id])
    assert run.data.tags["raglab.alerts"] == str(len(alerts))
    assert run.data.tags["raglab.alert.0"] == alerts[0]["message"]
    hist = client.get_metric_history(run.info.run_id, "top1_score.mean")
    windows = json.loads((tmp_path / "m2" / "monitor.json").read_text())["windows"]
    assert [m.step for m in hist] == [0, 1]
    assert [m.timestamp for m in hist] == [
        int(datetime.fromisoformat(w["start"]).timestamp() * 1000) for w in windows]


def test_planted_contradictions_raise_that_alert(tmp_path):
    contra = write_traffic(tmp_path / "contra.jsonl", traffic_lines(120, 4, contradict=0.3))
    p = _monitor(tmp_path, "m", str(contra), "monitor.sample_rate=0.5", "tracking=none")
    assert p.returncode == 1, p.stdout + p.stderr
    alerts = json.loads((tmp_path / "m" / "alerts.json").read_text())
    assert alerts and {a["kind"] for a in alerts} == {"contradicted_claim_rate"}
    assert all(a["value"] > 0.05 for a in alerts)
    clean = write_traffic(tmp_path / "clean.jsonl", traffic_lines(120, 4))
    p = _monitor(tmp_path, "m2", str(clean), "monitor.sample_rate=0.5", "tracking=none")
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((tmp_path / "m2" / "monitor.json").read_text())
    assert all(w["contradicted_claim_rate"] == 0.0 for w in doc["windows"])
    assert all(w["reference_free_context_precision"] == 0.5 for w in doc["windows"])  # 1 of 2
    assert not any("context_precision" in w for w in doc["windows"])  # the old name is gone


def test_usage_errors_exit_2(tmp_path):
    p = run_cli("monitor", str(tmp_path / "nope.jsonl"), "tracking=none",
                f"hydra.run.dir={tmp_path / 'm'}", cwd=tmp_path)
    assert p.returncode == 2 and "traffic file not found" in p.stderr
    t = write_traffic(tmp_path / "t.jsonl", traffic_lines(5, 1))
    p = run_cli("monitor", str(t), "monitor.window=3x", "tracking=none",
                f"hydra.run.dir={tmp_path / 'm'}", cwd=tmp_path)
    assert p.returncode == 2 and "monitor.window" in p.stderr and "Traceback" not in p.stderr


def test_sampling_is_deterministic_and_near_the_rate():
    lines = [TrafficLine.model_validate(r) for r in traffic_lines(2000, 9)]
    picked = [sampled(ln, 0.05) for ln in lines]
    assert picked == [sampled(ln, 0.05) for ln in lines]  # the same lines every time
    assert 60 <= sum(picked) <= 140  # ~5% of 2000
    assert all(sampled(ln, 0.2) for ln, p in zip(lines, picked) if p)  # nested rates
    assert all(sampled(ln, 1.0) for ln in lines) and not any(sampled(ln, 0.0) for ln in lines)


@pytest.mark.slow  # end to end (CLI runs): in the slow suite
def test_small_windows_alert_when_the_test_can_and_are_listed_untested_when_it_cannot(tmp_path):
    # the defaults: 200 lines a day, 5% judged (~10 judged lines a window); half the
    # answers contradicted: today's min_lines 20 skipped every window and said nothing
    bad = write_traffic(tmp_path / "bad.jsonl", traffic_lines(400, 5, contradict=0.5))
    p = _monitor(tmp_path, "m", str(bad), "tracking=none")
    assert p.returncode == 1, p.stdout + p.stderr
    doc = json.loads((tmp_path / "m" / "monitor.json").read_text())
    alerts = json.loads((tmp_path / "m" / "alerts.json").read_text())
    assert doc["alerts"] == alerts and doc["n_alerts"] >= 1
    fired = [a for a in alerts if a["status"] == "alert"]
    assert fired and {a["kind"] for a in fired} == {"contradicted_claim_rate"}
    for a in fired:
        w = next(w for w in doc["windows"] if w["start"] == a["window_start"])
        assert a["n"] == w["contradicted_claim_rate.n"] < 20
        assert a["contradicted"] == w["contradicted_lines"] and a["ci_low"] > 0.05
        assert a["unit"] == "judged line" and a["confidence"] == 0.95
    assert f"{len(fired)} alert(s)" in p.stdout

    # 40 lines over two days: about one judged line a window, too few for any test
    few = write_traffic(tmp_path / "few.jsonl", traffic_lines(40, 6, contradict=0.5))
    p = _monitor(tmp_path, "m2", str(few), "tracking=none")
    assert p.returncode == 0, p.stdout + p.stderr
    entries = json.loads((tmp_path / "m2" / "alerts.json").read_text())
    assert len(entries) == 2 and all(e["status"] == "untested" for e in entries)
    assert all(e["alert"] == "contradicted_claim_rate" and e["n"] < 5 for e in entries)
    untested = [ln for ln in p.stdout.splitlines() if ln.startswith("UNTESTED ")]
    assert len(untested) == 2 and "(monitor.min_judged)" in untested[0]
    assert "0 alert(s), 2 untested" in p.stdout
    doc = json.loads((tmp_path / "m2" / "monitor.json").read_text())
    assert [w["contradiction.status"] for w in doc["windows"]] == ["untested", "untested"]


@pytest.mark.slow  # end to end (CLI runs): in the slow suite
def test_with_a_baseline_contradictions_are_tested_against_its_rate(tmp_path):
    base = write_traffic(tmp_path / "base.jsonl", traffic_lines(200, 7, contradict=0.3),
                         bad=False)
    same = write_traffic(tmp_path / "same.jsonl", traffic_lines(200, 8, contradict=0.3))
    args = ("monitor.sample_rate=0.5", "monitor.min_lines=5", "tracking=none")
    p = _monitor(tmp_path, "m", str(same), "--baseline", str(base), *args)
    assert p.returncode == 0, p.stdout + p.stderr  # above 0.05, but no worse than the baseline
    assert "judged baseline lines contradicted" in p.stdout
    doc = json.loads((tmp_path / "m" / "monitor.json").read_text())
    assert doc["baseline_judged"] > 50 and doc["baseline_contradicted"] > 10
    assert all(w["contradicted_line_rate"] > 0.05 for w in doc["windows"])
    assert all(w["contradiction.status"] == "ok" for w in doc["windows"])

    clean = write_traffic(tmp_path / "clean.jsonl", traffic_lines(200, 7), bad=False)
    p = _monitor(tmp_path, "m2", str(same), "--baseline", str(clean), *args)
    assert p.returncode == 1, p.stdout + p.stderr
    alerts = json.loads((tmp_path / "m2" / "alerts.json").read_text())
    assert alerts and all(a["kind"] == "contradicted_claim_rate" for a in alerts)
    assert all(a["baseline_rate"] == 0 and a["p_value"] < 0.05 and "Fisher" in a["test"]
               for a in alerts)
