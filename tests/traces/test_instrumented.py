"""Traces of a real instrumented pipeline (the LangChain example of docs/pipelines.md):
scored from its traces, it scores what it scored live, through the CLI.

- OpenInference + OpenTelemetry SDK, spans written as the Collector's file exporter writes
  them (OTLP JSON lines, traced concurrently by the run's workers, so the spans of
  different traces interleave): ``system=replay system.path=TRACES`` gives the live run's
  metrics, doc ids, answers and context order; ``monitor`` reads the same lines as from
  the equivalent JSON Lines.
- MLflow's LangChain autologging into a sqlite store (slow: MLflow's store set-up):
  ``system.path=mlflow://EXPERIMENT`` the same; ``raglab monitor`` on the traces gives the
  same window figures as on the equivalent JSON Lines.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli, write_jsonl
from tests.systems.test_pipelines import _demo
from tests.traces.apps import write_apps

N_CASES = 12
DATA = ["dataset.corpus=corpus.jsonl", "dataset.cases=cases.jsonl", "dataset.labels=null",
        "tracking=none", "grader=heuristic", "progress=off", "k=2"]
TIMED = re.compile(r"^(latency_ms\.|cost_usd)")


PAGE = REPO / "docs" / "traces.md"
_BASH = re.compile(r"^```bash\n(?P<body>.*?)^```$", re.S | re.M)


def page_commands(mlflow: bool) -> list[tuple[dict[str, str], list[str]]]:
    """``(environment, raglab arguments)`` of each ``raglab`` command of docs/traces.md
    that reads OTLP JSON (``mlflow=False``) or MLflow traces."""
    out = []
    for m in _BASH.finditer(PAGE.read_text(encoding="utf-8")):
        for line in m.group("body").splitlines():
            words = shlex.split(line, comments=True)
            env = {}
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
                k, _, v = words.pop(0).partition("=")
                env[k] = v
            if words[:1] == ["raglab"] and ("mlflow://" in line) == mlflow:
                out.append((env, words[1:]))
    return out


def _run_page(root: Path, mlflow: bool) -> None:
    commands = page_commands(mlflow)
    assert len(commands) >= 2
    for i, (env, args) in enumerate(commands):
        proc = run_cli(*args, "tracking=none", "grader=heuristic", "progress=off",
                       f"hydra.run.dir={root / f'page-{i}'}", cwd=root, env=env)
        assert proc.returncode == 0, (args, proc.stderr[-2000:])
        assert "bad traces" not in proc.stdout and "trace(s)" not in proc.stderr


def _records(run: Path) -> dict[str, dict]:
    rows = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    return {r["case_id"]: r for r in rows}


def _metrics(run: Path) -> dict:
    return _untimed(json.loads((run / "metrics.json").read_text())["overall"])


def _shape(out: dict) -> dict:
    """What the traces must carry over from the live output (not its timings)."""
    return {"answer": out["answer"], "model": out.get("model"), "usage": out["usage"],
            **{stage: [(h["doc_id"], h["text"], h["start"], h["end"], h["score"])
                       for h in out[stage]] for stage in ("candidates", "context")}}


def _same_run(live: Path, replayed: Path) -> None:
    a, b = _records(live), _records(replayed)
    assert set(a) == set(b) and len(a) == N_CASES
    for cid in a:
        assert _shape(b[cid]["output"]) == _shape(a[cid]["output"]), cid
        assert b[cid]["output"]["latency_ms"].keys() >= {"retrieve", "generate", "total"}
        assert _untimed(b[cid]["metrics"]) == _untimed(a[cid]["metrics"]), cid
    assert _metrics(replayed) == _metrics(live)


def _untimed(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if not TIMED.match(k)}


@pytest.fixture(scope="module")
def otlp_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("otlp")
    write_apps(root)
    _demo(root, N_CASES)
    traces = root / "traces.jsonl"
    live = run_cli("run", "system=langchain", "system.factory=otlp_app:build",
                   "+system.options.corpus=corpus.jsonl", f"+system.options.traces={traces}",
                   *DATA, f"hydra.run.dir={root / 'live'}", f"cache_dir={root / 'cache'}",
                   cwd=root)
    assert live.returncode == 0, live.stderr[-3000:]
    return root, traces


def test_a_replay_from_openinference_otlp_traces_scores_what_the_live_run_scored(otlp_run):
    root, traces = otlp_run
    lines = traces.read_text().splitlines()
    assert len(lines) > N_CASES * 5  # one span a line: the traces' spans interleave
    assert re.fullmatch(r"[0-9a-f]{32}", json.loads(lines[0])["resourceSpans"][0]
                        ["scopeSpans"][0]["spans"][0]["traceId"])
    again = run_cli("run", "system=replay", f"system.path={traces}", *DATA,
                    f"hydra.run.dir={root / 'replayed'}", f"cache_dir={root / 'cache'}",
                    cwd=root)
    assert again.returncode == 0, again.stderr[-3000:]
    _same_run(root / "live", root / "replayed")
    assert "trace" not in again.stderr  # every trace paired (by its question), none bad


def test_monitor_reads_the_otlp_traces_as_the_equivalent_json_lines(otlp_run):
    from raglab.monitor.traffic import read_traffic

    root, traces = otlp_run
    from_traces = read_traffic(traces)
    assert from_traces.kind == "traces" and from_traces.n_bad == 0
    cases = {json.loads(x)["question"]: json.loads(x)["id"]
             for x in (root / "cases.jsonl").read_text().splitlines()}
    live = _records(root / "live")
    rows = []
    for _, line in from_traces.lines:  # the live outputs, asked and answered when traced
        out = live[cases[line.question]]["output"]
        rows.append({**{k: out[k] for k in ("candidates", "context", "answer", "usage")},
                     "id": line.id, "question": line.question,
                     "timestamp": line.timestamp.isoformat(),
                     "latency_ms": line.latency_ms})
    plain = read_traffic(write_jsonl(root / "traffic.jsonl", rows))
    assert len(plain.lines) == N_CASES and plain.n_bad == 0
    assert [ln.model_dump() for _, ln in from_traces.lines] == \
        [ln.model_dump() for _, ln in plain.lines]


@pytest.mark.slow
def test_the_otlp_commands_of_the_page_run_as_written(otlp_run):
    root, traces = otlp_run
    shutil.copy(traces, root / "last-month.jsonl")
    _run_page(root, mlflow=False)


@pytest.mark.slow
def test_mlflow_traces_replay_and_monitor_like_the_live_run(tmp_path):
    write_apps(tmp_path)
    _demo(tmp_path, N_CASES)
    store = "sqlite:///app.db"  # as docs/traces.md has it, in the working directory
    live = run_cli("run", "system=langchain", "system.factory=mlflow_app:build",
                   "+system.options.corpus=corpus.jsonl", f"+system.options.store={store}",
                   "+system.options.experiment=my-app", *DATA,
                   f"hydra.run.dir={tmp_path / 'live'}", cwd=tmp_path)
    assert live.returncode == 0, live.stderr[-3000:]
    env = {"MLFLOW_TRACKING_URI": store}
    again = run_cli("run", "system=replay", "system.path=mlflow://my-app", *DATA,
                    f"hydra.run.dir={tmp_path / 'replayed'}", cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    _same_run(tmp_path / "live", tmp_path / "replayed")

    # monitor: the traces against the same outputs as JSON Lines, window by window
    from raglab.monitor.traffic import read_traffic

    traced = read_traffic("mlflow://my-app", tracking_uri=f"sqlite:///{tmp_path / 'app.db'}")
    assert len(traced.lines) == N_CASES and traced.n_bad == 0
    cases = {json.loads(x)["question"]: json.loads(x)["id"]
             for x in (tmp_path / "cases.jsonl").read_text().splitlines()}
    recs = _records(tmp_path / "live")
    write_jsonl(tmp_path / "traffic.jsonl", [
        {**recs[cases[ln.question]]["output"], "question": ln.question,
         "timestamp": ln.timestamp.isoformat()} for _, ln in traced.lines])
    figures = []
    for name, source, extra in (("traces", "mlflow://my-app", ["--format", "mlflow"]),
                                ("plain", "traffic.jsonl", [])):
        mon = run_cli("monitor", source, *extra, "tracking=none", "grader=heuristic",
                      "monitor.sample_rate=1", "monitor.window=1w",
                      f"hydra.run.dir={tmp_path / ('mon-' + name)}", cwd=tmp_path, env=env)
        assert mon.returncode == 0, mon.stderr[-3000:]
        doc = json.loads((tmp_path / f"mon-{name}" / "monitor.json").read_text())
        assert doc["lines"] == N_CASES and doc["bad_lines"] == 0
        figures.append(doc["windows"])
    assert figures[0] == figures[1]
    _run_page(tmp_path, mlflow=True)
