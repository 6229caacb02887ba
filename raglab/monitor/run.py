"""One monitor invocation: traffic -> sample -> judge -> windows -> alerts -> files, MLflow."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from raglab import registry
from raglab.cache import StageCache
from raglab.data.io import atomic_write_json
from raglab.errors import ConfigError, storage_error
from raglab.graders.standalone import open_grading, prepare
from raglab.monitor.judge import judge_line
from raglab.monitor.traffic import (
    MonitorCfg,
    read_traffic,
    sample_note,
    sampled,
    window_seconds,
    window_start,
)
from raglab.monitor.windows import (
    LineResult,
    contradiction_counts,
    find_alerts,
    real_alerts,
    turn_table,
    window_table,
)
from raglab.systems.base import WorkCounter


def run_monitor(cfg: Any, mon: MonitorCfg, traffic_path: str,
                baseline_path: str | None, run_dir: Path, fmt: str = "auto") -> dict[str, Any]:
    """Read, sample, judge, window, alert; writes monitor.json (with ``sessions``,
    ``lines_in_sessions`` and the figures per turn, ``by_turn``, of lines with a session id)
    and alerts.json and logs to MLflow; returns monitor.json's content (plus
    ``mlflow_run_id``, and ``sample_note``: a line when the sample is too small, see
    :func:`sample_note`). ``fmt``: the traffic's format (``auto``: told from the
    content)."""
    uri = getattr(cfg.tracking, "uri", None)
    traffic = read_traffic(traffic_path, fmt, uri)
    baseline = read_traffic(baseline_path, "auto", uri) if baseline_path else None
    if not traffic.lines:
        first = f"; first: {traffic.bad[0]}" if traffic.bad else ""
        read_as = f"; {traffic.read_as}" if traffic.read_as else ""
        raise ConfigError(f"{traffic.source}: no usable traffic line ({traffic.n_bad} "
                          f"bad{first}{read_as})")
    prompts, versions = prepare(cfg)
    tracked = registry.entry("tracking", cfg.tracking.name).factory.tracks
    if tracked:
        from raglab.tracking.mlflow_store import check_tracking

        check_tracking(cfg.tracking.uri)
    seconds = window_seconds(mon.window)
    cache = StageCache(cfg.cache_dir)
    work = WorkCounter()

    async def go(lines) -> list[LineResult]:
        async with open_grading(cfg, prompts, versions, cache, work) as grading:

            async def one(n: int, line) -> LineResult:
                r = LineResult(window_start(line.timestamp, seconds), line.top1_score(),
                               bool(line.candidates or line.context), line.feedback,
                               sampled(line, mon.sample_rate),
                               turn=line.turn if line.session is not None else None)
                if r.sampled:
                    r.metrics, r.grader_error = await judge_line(grading, line, n)
                return r

            return list(await asyncio.gather(*(one(n, ln) for n, ln in lines)))

    results = asyncio.run(go(traffic.lines))
    windows = window_table(results, seconds)
    base_scores: list[float] | None = None
    base_contra: tuple[int, int] | None = None
    if baseline is not None:
        base_scores = [s for _, ln in baseline.lines if (s := ln.top1_score()) is not None]
        # the baseline's sample is judged too: the contradiction test compares with its rate
        base_contra = contradiction_counts(asyncio.run(go(baseline.lines)))
    alerts = find_alerts(windows, base_scores, max_contradicted=mon.max_contradicted,
                         drift_p=mon.drift_p, drift_min_effect=mon.drift_min_effect,
                         min_lines=mon.min_lines, confidence=mon.alert_confidence,
                         min_judged=mon.min_judged, baseline_contradicted=base_contra)
    fired = real_alerts(alerts)
    for w in windows:
        w.pop("_scores", None)
    doc = {"traffic": traffic.source, "baseline": baseline.source if baseline else None,
           "monitor": mon.model_dump(), "grader": cfg.grader.name, "versions": versions,
           "read_as": traffic.read_as or None,
           "lines": len(traffic.lines), "bad_lines": traffic.n_bad, "bad": traffic.bad[:50],
           "bad_by_kind": traffic.bad_by_kind,
           "baseline_lines": len(baseline.lines) if baseline else None,
           "baseline_bad_lines": baseline.n_bad if baseline else None,
           "baseline_contradicted": base_contra[0] if base_contra else None,
           "baseline_judged": base_contra[1] if base_contra else None,
           "n_alerts": len(fired), "n_untested": len(alerts) - len(fired),
           "sessions": traffic.sessions,
           "lines_in_sessions": sum(ln.session is not None for _, ln in traffic.lines),
           "by_turn": turn_table(results),
           "work": work.as_dict(), "windows": windows, "alerts": alerts}
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise storage_error(e, "the monitor run directory", run_dir) from None
    atomic_write_json(run_dir / "monitor.json", doc)
    atomic_write_json(run_dir / "alerts.json", alerts)
    mlflow_id = _log(cfg, mon, doc, run_dir) if tracked else None
    note = sample_note([ln for _, ln in traffic.lines], mon.sample_rate,
                       "traces" if traffic.kind == "traces" else "lines")
    return {**doc, "mlflow_run_id": mlflow_id, "sample_note": note}


def _log(cfg: Any, mon: MonitorCfg, doc: dict[str, Any], run_dir: Path) -> str:
    """One MLflow run: each window figure a series (step = window, timestamp = its start),
    alerts as tags, monitor.json and alerts.json as artifacts."""
    from datetime import datetime

    from raglab.tracking.standalone import log_standalone_run

    series = []
    skip = ("start", "end")
    for step, w in enumerate(doc["windows"]):
        ts = int(datetime.fromisoformat(w["start"]).timestamp() * 1000)
        series += [(k, v, ts, step) for k, v in w.items()
                   if k not in skip and isinstance(v, (int, float)) and v is not None]
    tags = {f"raglab.metric_version.{k}": v for k, v in doc["versions"].items()}
    fired = real_alerts(doc["alerts"])
    tags.update({"raglab.traffic": doc["traffic"], "raglab.alerts": str(len(fired)),
                 "raglab.untested": str(doc["n_untested"]), "raglab.run_dir": str(run_dir)})
    if doc["baseline"]:
        tags["raglab.baseline"] = doc["baseline"]
    for i, a in enumerate(fired):
        tags[f"raglab.alert.{i}"] = a["message"]
    params = {f"monitor.{k}": v for k, v in doc["monitor"].items()}
    params.update({"grader.name": doc["grader"], "traffic": doc["traffic"],
                   "baseline": doc["baseline"]})
    return log_standalone_run(cfg.tracking.uri, mon.experiment, Path(doc["traffic"]).name,
                              params=params, series=series,
                              metrics={"lines": doc["lines"], "bad_lines": doc["bad_lines"],
                                       "alerts": len(fired), "untested": doc["n_untested"],
                                       "sessions": doc["sessions"]},
                              tags=tags, artifacts=[run_dir / "monitor.json",
                                                    run_dir / "alerts.json"])
