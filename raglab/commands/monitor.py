"""``raglab monitor TRAFFIC [--baseline BASELINE] [overrides]``: production traffic per
time window, with alerts."""

from __future__ import annotations

import sys
from pathlib import Path

from raglab.commands.common import conf_dir, fail

HELP = """usage: raglab monitor TRAFFIC [--baseline BASELINE] [overrides]

TRAFFIC and BASELINE: JSON Lines of production traffic (one system output per line plus
question, timestamp (ISO 8601) and optional user, filters, feedback) or run directories.
No labels needed. Per window (monitor.window, e.g. 1h, 1d): faithfulness,
contradicted_claim_rate, relevance and grader-judged context precision on a deterministic
sample (monitor.sample_rate, default 0.05) judged by the configured grader, and top-1
retrieval score statistics on every line. Alerts: contradicted_claim_rate above
monitor.max_contradicted; top-1 retrieval scores shifted against the baseline
(Kolmogorov-Smirnov: p < monitor.drift_p and D >= monitor.drift_min_effect). Writes
monitor.json and alerts.json into its run directory (hydra.run.dir, default
outputs/monitor/DATE/TIME); logs a time series to MLflow (experiment monitor.experiment,
steps = windows; tracking=none skips it). Bad traffic lines are counted, not fatal.

Exit 0 no alert; 1 an alert fired; 2 usage or unreadable input.
"""

_state: dict = {}


def main(argv: list[str]) -> None:
    if not argv or any(a in ("-h", "--help") for a in argv):
        print(HELP)
        return
    import hydra

    rest: list[str] = []
    traffic = baseline = None
    it = iter(argv)
    for a in it:
        if a == "--baseline" or a.startswith("--baseline="):
            baseline = a.split("=", 1)[1] if "=" in a else next(it, None)
            if not baseline:
                fail("--baseline needs a traffic file or run directory", 2)
        elif traffic is None and "=" not in a and not a.startswith("-"):
            traffic = a
        elif a.startswith("monitor=") or a.startswith("+monitor="):
            rest.append("+monitor=" + a.split("=", 1)[1])
        else:
            rest.append(a)
    if traffic is None:
        fail("monitor needs a TRAFFIC file or run directory (raglab monitor --help)", 2)
    _state.update(traffic=traffic, baseline=baseline)
    if not any(a.startswith("+monitor=") for a in rest):
        rest.insert(0, "+monitor=default")
    if not any(a.startswith("hydra.run.dir=") for a in rest):
        rest.insert(0, "hydra.run.dir=outputs/monitor/${now:%Y-%m-%d}/${now:%H-%M-%S}")
    sys.argv = ["raglab monitor", *rest]
    app = hydra.main(config_path=str(conf_dir()), config_name="config", version_base="1.3")(task)
    app()


def task(dict_cfg) -> None:
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException
    from pydantic import ValidationError

    from raglab.config import config_error, parse_run_config
    from raglab.errors import UserError
    from raglab.monitor.traffic import MonitorCfg

    run_dir = Path(HydraConfig.get().runtime.output_dir).resolve()
    try:
        resolved = OmegaConf.to_container(dict_cfg, resolve=True, throw_on_missing=True)
        mon_data = resolved.pop("monitor", {}) or {}
        try:
            mon = MonitorCfg.model_validate(mon_data)
        except ValidationError as e:
            raise config_error(e, mon_data, "monitor") from None
        cfg = parse_run_config(resolved)
        code = monitor(cfg, mon, resolved, run_dir)
    except OmegaConfBaseException as e:
        fail(" ".join(str(e).split()), 2)
    except UserError as e:
        fail(str(e), 2)
    sys.exit(code)


def monitor(cfg, mon, resolved: dict, run_dir: Path) -> int:
    import asyncio
    import json

    from raglab import registry
    from raglab.cache import StageCache
    from raglab.data.io import atomic_write_json
    from raglab.errors import ConfigError
    from raglab.graders.orchestrate import Grading
    from raglab.graders.spec import family_versions
    from raglab.monitor.judge import judge_line
    from raglab.monitor.traffic import read_traffic, sampled, window_seconds, window_start
    from raglab.monitor.windows import JUDGED, LineResult, find_alerts, window_table
    from raglab.runner.components import build_grader, grader_prompts
    from raglab.systems.base import WorkCounter

    if cfg.grader.name == "none":
        raise ConfigError("monitor needs a grader (grader=heuristic|claude)")
    traffic = read_traffic(_state["traffic"])
    baseline = read_traffic(_state["baseline"]) if _state.get("baseline") else None
    if not traffic.lines:
        raise ConfigError(f"{traffic.source}: no usable traffic line ({len(traffic.bad)} bad)")
    check = registry.hook("grader", cfg.grader.name, "preflight")
    if check is not None:
        check(cfg)
    tracked = cfg.tracking.name == "mlflow"
    if tracked:
        from raglab.tracking.mlflow_store import check_tracking

        check_tracking(cfg.tracking.uri)
    seconds = window_seconds(mon.window)
    prompts = grader_prompts(cfg)
    versions = family_versions(cfg.grader, prompts, cfg.metrics)
    cache = StageCache(cfg.cache_dir)
    work = WorkCounter()

    async def go() -> list[LineResult]:
        llm = None
        if registry.hook("grader", cfg.grader.name, "uses_llm", False):
            from raglab.llm.client import LLMClient

            settings = registry.hook("grader", cfg.grader.name, "llm_settings")(cfg.grader, cfg)
            llm = LLMClient(**settings, cache=cache)
        grader = build_grader(cfg, prompts, llm)
        grading = Grading(grader, cfg.grader.name, versions, cache, work)

        async def one(n: int, line) -> LineResult:
            r = LineResult(window_start(line.timestamp, seconds), line.top1_score(),
                           bool(line.candidates or line.context), line.feedback,
                           sampled(line, mon.sample_rate))
            if r.sampled:
                r.metrics, r.grader_error = await judge_line(grading, line, n)
            return r

        try:
            return list(await asyncio.gather(*(one(n, ln) for n, ln in traffic.lines)))
        finally:
            if llm is not None:
                await llm.aclose()
            await grader.aclose()

    results = asyncio.run(go())
    windows = window_table(results, seconds)
    base_scores = None
    if baseline is not None:
        base_scores = [ln.top1_score() for _, ln in baseline.lines]
        base_scores = [s for s in base_scores if s is not None]
    alerts = find_alerts(windows, base_scores, max_contradicted=mon.max_contradicted,
                         drift_p=mon.drift_p, drift_min_effect=mon.drift_min_effect,
                         min_lines=mon.min_lines)
    for w in windows:
        w.pop("_scores", None)
    doc = {"traffic": traffic.source, "baseline": baseline.source if baseline else None,
           "monitor": mon.model_dump(), "grader": cfg.grader.name, "versions": versions,
           "lines": len(traffic.lines), "bad_lines": len(traffic.bad), "bad": traffic.bad[:50],
           "baseline_lines": len(baseline.lines) if baseline else None,
           "baseline_bad_lines": len(baseline.bad) if baseline else None,
           "work": work.as_dict(), "windows": windows, "alerts": alerts}
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(run_dir / "monitor.json", doc)
    atomic_write_json(run_dir / "alerts.json", alerts)
    mlflow_id = _log(cfg, mon, doc, run_dir) if tracked else None

    print(f"raglab monitor: {traffic.source}: {len(traffic.lines)} lines in {len(windows)} "
          f"window(s) of {mon.window}, {sum(w['sampled'] for w in windows)} sampled "
          f"(sample_rate {mon.sample_rate:g}), grader {cfg.grader.name}")
    if traffic.bad:
        print(f"bad traffic lines: {len(traffic.bad)} (not used; first: {traffic.bad[0]})")
    if baseline is None:
        print("no --baseline: the retrieval drift test is off")
    elif baseline.bad:
        print(f"bad baseline lines: {len(baseline.bad)} (first: {baseline.bad[0]})")
    cols = ["lines", "judged", *JUDGED, "top1_score.p50", "drift.ks_d"]
    short = {"contradicted_claim_rate": "contradicted", "context_precision": "ctx_prec",
             "top1_score.p50": "top1_p50", "drift.ks_d": "ks_d", "faithfulness": "faithful"}
    print("window start               " + " ".join(short.get(c, c).rjust(12) for c in cols))

    def cell(v) -> str:
        return "n/a" if v is None else (str(v) if isinstance(v, int) else f"{v:.3f}")

    for w in windows:
        print(f"{w['start']:<26} " + " ".join(cell(w.get(c)).rjust(12) for c in cols))
    for a in alerts:
        print(f"ALERT {a['kind']}: {a['message']}")
    print(f"{len(alerts)} alert(s); wrote {run_dir / 'monitor.json'} and alerts.json")
    if mlflow_id:
        print(f"MLflow run {mlflow_id} (experiment {mon.experiment!r})")
    json.dumps(doc, allow_nan=False)
    return 1 if alerts else 0


def _log(cfg, mon, doc: dict, run_dir: Path) -> str:
    from datetime import datetime

    from raglab.tracking.standalone import log_standalone_run

    series = []
    skip = ("start", "end")
    for step, w in enumerate(doc["windows"]):
        ts = int(datetime.fromisoformat(w["start"]).timestamp() * 1000)
        series += [(k, v, ts, step) for k, v in w.items()
                   if k not in skip and isinstance(v, (int, float)) and v is not None]
    tags = {f"raglab.metric_version.{k}": v for k, v in doc["versions"].items()}
    tags.update({"raglab.traffic": doc["traffic"], "raglab.alerts": str(len(doc["alerts"])),
                 "raglab.run_dir": str(run_dir)})
    if doc["baseline"]:
        tags["raglab.baseline"] = doc["baseline"]
    for i, a in enumerate(doc["alerts"]):
        tags[f"raglab.alert.{i}"] = a["message"]
    params = {f"monitor.{k}": v for k, v in doc["monitor"].items()}
    params.update({"grader.name": doc["grader"], "traffic": doc["traffic"],
                   "baseline": doc["baseline"]})
    return log_standalone_run(cfg.tracking.uri, mon.experiment, Path(doc["traffic"]).name,
                              params=params, series=series,
                              metrics={"lines": doc["lines"], "bad_lines": doc["bad_lines"],
                                       "alerts": len(doc["alerts"])},
                              tags=tags, artifacts=[run_dir / "monitor.json",
                                                    run_dir / "alerts.json"])
