"""raglab log RUN_DIR [--uri URI] [--experiment NAME] [--run-name NAME]: log a finished run
directory to MLflow later (after an outage, or a run made with tracking=none).

Logging the same run directory again (same directory, configuration, records.jsonl and
metrics.json) finds the run already logged and says so instead of making a second one; a
directory whose records or metrics changed since (a resumed run, an edit) is logged again
as a new run, and the command says why."""

from __future__ import annotations

import argparse
from pathlib import Path

from raglab.commands.common import fail
from raglab.secrets import clip_line


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="raglab log", description=__doc__.split("\n\n")[0]
                                 .split(": ", 1)[1].replace("\n", " "),
                                 epilog=__doc__.split("\n\n")[1].replace("\n", " "))
    ap.add_argument("run_dir", type=Path, help="a run directory (holds metrics.json)")
    ap.add_argument("--uri", default="sqlite:///mlflow.db", help="MLflow tracking URI "
                    "(default: sqlite:///mlflow.db in the current directory)")
    ap.add_argument("--experiment", default="raglab", help="MLflow experiment (default: raglab)")
    ap.add_argument("--run-name", default=None,
                    help="run name (default: the config's run_name, else the directory name)")
    args = ap.parse_args(argv)
    run_dir = args.run_dir.resolve()
    from raglab.errors import UserError
    from raglab.tracking.mlflow_store import check_tracking, log_run_dir, ui_command
    from raglab.tracking.mlflow_ui import logged_run

    try:  # the one place a user's mistake ends this command
        for name in ("metrics.json", "config.yaml", "records.jsonl"):
            if not (run_dir / name).is_file():
                raise UserError(f"{run_dir}: not a finished run directory ({name} is missing)")
        check_tracking(args.uri)
        from raglab.runner.identity import read_identity
        from raglab.tracking.mlflow_store import unfinished_run

        started = read_identity(run_dir).get("mlflow")  # the run this directory started
        pending = unfinished_run(args.uri, args.experiment, started)
        existing, again = (None, None) if pending else logged_run(args.uri, args.experiment,
                                                                  run_dir)
        if existing:
            print(f"{run_dir} is already logged as MLflow run {existing} (experiment "
                  f"{args.experiment!r}), with the same records.jsonl and metrics.json; "
                  "nothing logged again")
            print(f"view it with:\n  {ui_command(args.uri)}")
            return
        from raglab.report.run_report import report_files

        name, describe = _naming(run_dir, args.run_name)
        run_id = log_run_dir(run_dir, args.uri, args.experiment, run_name=name,
                             describe=describe, resume=started if pending else None,
                             report=report_files(run_dir))
    except UserError as e:  # 2: a usage or input error (a NegativeOutcome says its own)
        fail(str(e), getattr(e, "exit_code", 2))
    except Exception as e:  # noqa: BLE001 - the store failed: one line, the directory stays
        fail(f"MLflow failed while logging ({type(e).__name__}: "
             f"{clip_line(e, 300)}); {run_dir} is unchanged, run this command "
             "again once the store is back")
    print(f"logged {run_dir} as MLflow run {run_id} (experiment {args.experiment!r})"
          + (f"; logged again: {again}" if again else ""))
    print(f"view it with:\n  {ui_command(args.uri)}")


def _naming(run_dir: Path, run_name: str | None):
    """The run's name and description, as ``raglab run`` would have made them."""
    from raglab.commands.compose import shipped_defaults
    from raglab.data.io import read_run_metrics
    from raglab.data.yaml_io import load_yaml_file
    from raglab.errors import UserError
    from raglab.report.summary import config_diff, run_description
    from raglab.secrets import redact

    try:
        cfg = load_yaml_file(run_dir / "config.yaml") or {}
    except UserError:
        cfg = {}
    cfg = redact(cfg) if isinstance(cfg, dict) else {}
    name = run_name or (cfg.get("run_name") if isinstance(cfg.get("run_name"), str) else None) \
        or run_dir.name
    defaults = shipped_defaults()
    diffs = config_diff(redact(defaults), cfg) if defaults else []
    metrics = read_run_metrics(run_dir)
    return name, (lambda link: run_description(name, metrics, cfg, diffs, link))
