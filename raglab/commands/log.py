"""``raglab log RUN_DIR [--uri URI] [--experiment NAME] [--run-name NAME]``: log a finished
run directory to MLflow later (after an outage, or a run made with tracking=none)."""

from __future__ import annotations

import argparse
from pathlib import Path

from raglab.commands.common import fail


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="raglab log", description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path, help="a run directory (holds metrics.json)")
    ap.add_argument("--uri", default="sqlite:///mlflow.db", help="MLflow tracking URI "
                    "(default: sqlite:///mlflow.db in the current directory)")
    ap.add_argument("--experiment", default="raglab", help="MLflow experiment (default: raglab)")
    ap.add_argument("--run-name", default=None, help="run name (default: the directory name)")
    args = ap.parse_args(argv)
    run_dir = args.run_dir.resolve()
    from raglab.errors import UserError
    from raglab.tracking.mlflow_store import check_tracking, log_run_dir, ui_command

    try:  # the one place a user's mistake ends this command
        for name in ("metrics.json", "config.yaml", "records.jsonl"):
            if not (run_dir / name).is_file():
                raise UserError(f"{run_dir}: not a finished run directory ({name} is missing)")
        check_tracking(args.uri)
        run_id = log_run_dir(run_dir, args.uri, args.experiment,
                             run_name=args.run_name or run_dir.name)
    except UserError as e:
        fail(str(e))
    print(f"logged {run_dir} as MLflow run {run_id} (experiment {args.experiment!r})")
    print(f"view it with:\n  {ui_command(args.uri)}")
