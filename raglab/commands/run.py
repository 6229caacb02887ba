"""``raglab run [overrides]`` (and ``-m`` sweeps): a Hydra application built lazily."""

from __future__ import annotations

import sys
from pathlib import Path

from raglab.commands.common import conf_dir, fail


def _run_name(cfg, overrides: list[str]) -> str:
    if cfg.run_name:
        return cfg.run_name
    kept = [o for o in overrides if not o.startswith(("hydra.", "tracking.", "cache_dir="))]
    return ",".join(kept) if kept else "defaults"


def task(dict_cfg) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

    from raglab.config import parse_run_config
    from raglab.errors import ConfigError, UserError
    from raglab.runner.components import build_tracker
    from raglab.runner.run import Run, print_summary
    from raglab.secrets import redact

    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir).resolve()
    tracker = None
    try:
        try:
            resolved = OmegaConf.to_container(dict_cfg, resolve=True, throw_on_missing=True)
        except MissingMandatoryValue as e:
            raise ConfigError(f"config {e.full_key}: missing value "
                              f"(set it with {e.full_key}=...)") from None
        except OmegaConfBaseException as e:
            raise ConfigError(" ".join(str(e).split())) from None
        cfg = parse_run_config(resolved)
        public = redact(resolved)
        sweep_dir = str(Path(hc.sweep.dir).resolve()) if hc.mode == RunMode.MULTIRUN else None
        tracker = build_tracker(cfg, public, _run_name(cfg, list(hc.overrides.task)), sweep_dir)
        run = Run(cfg, run_dir, OmegaConf.to_yaml(OmegaConf.create(public)))
        tracker.check()
        metrics = run.execute(tracker)
        tracker.finished(run_dir)
    except UserError as e:  # the one place a user's mistake ends this command
        if tracker is not None:
            tracker.failed(str(e))
        fail(str(e), getattr(e, "exit_code", 1))  # 3: metric versions differ (a resume)
    except KeyboardInterrupt:
        if tracker is not None:
            tracker.killed()
        print(f"raglab: interrupted; records kept in {run_dir / 'records.jsonl'}; "
              "run again with the same hydra.run.dir to resume", file=sys.stderr)
        sys.exit(130)
    except Exception as e:
        if tracker is not None:
            tracker.failed(f"{type(e).__name__}: {e}")
        raise
    print_summary(metrics, run_dir, _calibration(cfg, metrics["metric_versions"]))
    where = tracker.where()
    if where:
        print(where)


def main(argv: list[str]) -> None:
    import hydra

    sys.argv = ["raglab run", *argv]
    app = hydra.main(config_path=str(conf_dir()), config_name="config", version_base="1.3")(task)
    app()


def _calibration(cfg, versions: dict[str, str]) -> dict[str, str]:
    """Each family version's kappa (raglab calibrate), from cache_dir or the tracking store."""
    from raglab.report.calibration import lookup

    tracked = None
    if cfg.tracking.name == "mlflow":
        from raglab.tracking.standalone import calibration_finder

        tracked = calibration_finder(cfg.tracking.uri)
    return lookup(versions, cfg.cache_dir, tracked)
