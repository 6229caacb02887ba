"""``raglab monitor TRAFFIC [--baseline BASELINE] [overrides]``: production traffic per
time window, with alerts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

from raglab.commands.common import conf_dir, fail

HELP = """usage: raglab monitor TRAFFIC [--baseline BASELINE] [--format F] [overrides]

TRAFFIC and BASELINE: JSON Lines of production traffic (one system output per line plus
question, timestamp (ISO 8601) and optional user, filters, feedback), run directories, or
traces: OTLP JSON (the OpenTelemetry Collector's file exporter; OpenInference or GenAI
attributes) or mlflow://EXPERIMENT (in the store MLFLOW_TRACKING_URI, else tracking.uri,
names). --format otlp|mlflow|jsonl (default: told from the content). No labels needed.
Per window (monitor.window, e.g. 1h, 1d): faithfulness,
contradicted_claim_rate, relevance and reference_free_context_precision (the share of
context passages supporting a claim of the answer, judged by the grader) on a deterministic
sample (monitor.sample_rate, default 0.05; a sample under 20 lines is said, with a rate
that samples 20) judged by the configured grader, and top-1 retrieval score statistics on
every line. Alerts: the share of judged lines with a
contradicted claim above monitor.max_contradicted at confidence monitor.alert_confidence
(exact one-sided lower bound; with --baseline, one-sided Fisher exact test against the
baseline's share); top-1 retrieval scores shifted against the baseline
(Kolmogorov-Smirnov: p < monitor.drift_p and D >= monitor.drift_min_effect). A window with
too few judged lines (monitor.min_judged) or scored lines (monitor.min_lines) for a test is
listed as UNTESTED (alerts.json: status untested), not passed. Writes
monitor.json and alerts.json into its run directory (hydra.run.dir, default
outputs/monitor/DATE/TIME); logs a time series to MLflow (experiment monitor.experiment,
steps = windows; tracking=none skips it). Bad traffic lines are counted, not fatal (bad
traces by kind, the first of each shown).

Exit 0 no alert (untested windows included); 1 an alert fired; 2 usage or unreadable input.
"""

_state: dict = {}
FORMATS = ("auto", "otlp", "mlflow", "jsonl")


def main(argv: list[str]) -> None:
    if any(a in ("-h", "--help") for a in argv):
        print(HELP)
        return
    if not argv:
        print(HELP, file=sys.stderr)
        sys.exit(2)
    import hydra

    rest: list[str] = []
    traffic = baseline = None
    fmt = "auto"
    it = iter(argv)
    for a in it:
        if a == "--baseline" or a.startswith("--baseline="):
            baseline = a.split("=", 1)[1] if "=" in a else next(it, None)
            if not baseline:
                fail("--baseline needs a traffic file or run directory", 2)
        elif a == "--format" or a.startswith("--format="):
            fmt = (a.split("=", 1)[1] if "=" in a else next(it, None)) or ""
            if fmt not in FORMATS:
                fail(f"--format must be one of {', '.join(FORMATS)} (got {fmt!r})", 2)
        elif traffic is None and "=" not in a and not a.startswith("-"):
            traffic = a
        elif a.startswith("monitor=") or a.startswith("+monitor="):
            rest.append("+monitor=" + a.split("=", 1)[1])
        else:
            rest.append(a)
    if traffic is None:
        fail("monitor needs a TRAFFIC file or run directory (raglab monitor --help)", 2)
    _state.update(traffic=traffic, baseline=baseline, format=fmt)
    if not any(a.startswith("+monitor=") for a in rest):
        rest.insert(0, "+monitor=default")
    if not any(a.startswith("hydra.run.dir=") for a in rest):
        rest.insert(0, "hydra.run.dir=outputs/monitor/${now:%Y-%m-%d}/${now:%H-%M-%S}")
    sys.argv = ["raglab monitor", *rest]
    from raglab.commands.compose import register_schema_defaults, run_hydra_app

    register_schema_defaults()
    app = hydra.main(config_path=str(conf_dir()), config_name="config", version_base="1.3")(task)
    run_hydra_app(app, rest, "monitor run")


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
        container = OmegaConf.to_container(dict_cfg, resolve=True, throw_on_missing=True)
        assert isinstance(container, dict)  # Hydra's task gets a DictConfig
        resolved = cast(dict[str, Any], container)
        mon_data = resolved.pop("monitor", {}) or {}
        try:
            mon = MonitorCfg.model_validate(mon_data)
        except ValidationError as e:
            raise config_error(e, mon_data, "monitor") from None
        cfg = parse_run_config(resolved)
        code = monitor(cfg, mon, resolved, run_dir)
    except OmegaConfBaseException as e:
        _drop_empty(run_dir)
        fail(" ".join(str(e).split()), 2)
    except UserError as e:
        _drop_empty(run_dir)
        fail(str(e), 2)
    sys.exit(code)


def _drop_empty(run_dir: Path) -> None:
    """Hydra makes the run directory before the task: none is left behind for nothing."""
    try:
        run_dir.rmdir()  # only succeeds when empty
    except OSError:
        pass


def monitor(cfg, mon, resolved: dict, run_dir: Path) -> int:
    from raglab.monitor.run import run_monitor
    from raglab.monitor.windows import JUDGED, real_alerts

    doc = run_monitor(cfg, mon, _state["traffic"], _state.get("baseline"), run_dir,
                      _state.get("format", "auto"))
    windows, entries = doc["windows"], doc["alerts"]
    alerts = real_alerts(entries)
    untested = [a for a in entries if a not in alerts]
    print(f"raglab monitor: {doc['traffic']}: {doc['lines']} lines in {len(windows)} "
          f"window(s) of {mon.window}, {sum(w['sampled'] for w in windows)} sampled "
          f"(sample_rate {mon.sample_rate:g}), grader {cfg.grader.name}")
    if doc["read_as"]:
        from raglab.text.escape import term

        print(term(doc["read_as"]))
    if doc["sample_note"]:
        print(doc["sample_note"])
    if doc["bad_by_kind"]:
        from raglab.text.escape import term

        kinds = doc["bad_by_kind"]
        print(f"bad traces: {doc['bad_lines']} (not used)"
              + (f", {kinds['no content']} without content" if "no content" in kinds else "")
              + ": " + ", ".join(f"{k} {n}" for k, n in kinds.items()))
        for first in doc["bad"]:
            print(f"  first: {term(first)}")
    elif doc["bad_lines"]:
        from raglab.text.escape import term

        print(f"bad traffic lines: {doc['bad_lines']} (not used; first: "
              f"{term(doc['bad'][0])})")
    if doc["baseline"] is None:
        print("no --baseline: the retrieval drift test is off")
    else:
        if doc["baseline_bad_lines"]:
            print(f"bad baseline lines: {doc['baseline_bad_lines']}")
        print(f"contradiction test against the baseline: {doc['baseline_contradicted']} of "
              f"{doc['baseline_judged']} judged baseline lines contradicted")
    cols = ["lines", "judged", *JUDGED, "contradicted_lines", "contradiction.status",
            "top1_score.p50", "drift.ks_d"]
    short = {"contradicted_claim_rate": "contradicted",
             "reference_free_context_precision": "ctx_prec",
             "top1_score.p50": "top1_p50", "drift.ks_d": "ks_d", "faithfulness": "faithful",
             "contradicted_lines": "contra_lines", "contradiction.status": "contra_test"}
    print("window start               " + " ".join(short.get(c, c).rjust(12) for c in cols))

    def cell(v) -> str:
        return "n/a" if v is None else (str(v) if isinstance(v, (int, str)) else f"{v:.3f}")

    for w in windows:
        print(f"{w['start']:<26} " + " ".join(cell(w.get(c)).rjust(12) for c in cols))
    if doc.get("by_turn"):  # lines of conversations: the same figures per turn
        for turn, f in doc["by_turn"].items():
            print(f"{'turn ' + turn:<26} " + " ".join(cell(f.get(c)).rjust(12) for c in cols))
    for a in alerts:
        print(f"ALERT {a['kind']}: {a['message']}")
    for a in untested:
        print(f"UNTESTED {a['alert']}: window {a['window_start']}: {a['reason']}")
    print(f"{len(alerts)} alert(s), {len(untested)} untested; wrote "
          f"{run_dir / 'monitor.json'} and alerts.json")
    if doc["mlflow_run_id"]:
        print(f"MLflow run {doc['mlflow_run_id']} (experiment {mon.experiment!r})")
    return 1 if alerts else 0
