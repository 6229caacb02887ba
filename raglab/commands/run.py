"""``raglab run [overrides]`` (and ``-m`` sweeps): a Hydra application built lazily.

Before Hydra starts a sweep, every job's configuration is composed and validated (the jobs
of the command line and of ``hydra.sweeper.params`` alike), so a
configuration error fails with one line, creates no run directory and runs no job. A single
run is composed once, by Hydra: an error composing it is turned into the same one line, and
one found validating it removes the (still empty) run directory Hydra made. A sweep prints
one line per job; at the end the sweep callback (:mod:`raglab.runner.sweep`) prints the job
table, the parent run and the one ``mlflow ui`` command.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from raglab.commands.common import fail
from raglab.runner.sweep import SWEEP_ENV, sweep_context
from raglab.secrets import clip_line


def _fail_config(message: str, run_dir: Path | None = None) -> None:
    if run_dir is not None:
        _remove_if_empty(run_dir)
    fail(message, 2)


def _remove_if_empty(run_dir: Path) -> None:
    """Hydra makes the run directory before the task: leave none behind for nothing (a
    directory that holds only raglab's lock, which no process holds, counts as empty)."""
    from raglab.runner.lock import remove_unheld

    try:
        remove_unheld(run_dir)
        run_dir.rmdir()  # only succeeds when empty
    except OSError:
        return
    parent = run_dir.parent  # outputs/DATE made for this run alone
    try:
        if parent != Path.cwd() and parent.is_relative_to(Path.cwd()):
            parent.rmdir()
    except OSError:
        pass


@dataclass
class JobInfo:
    """What a run takes from Hydra's job configuration."""

    output_dir: str
    task_overrides: list[str]
    choices: dict
    multirun: bool = False
    sweep_dir: str | None = None
    num: int = 0


def task(dict_cfg) -> None:
    """Hydra's task function: the run, with what it takes from Hydra's job configuration."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

    from raglab.errors import ConfigError

    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    # (the overrides as typed: an element such as `+x=${y}` is not an interpolation here)
    overrides = cast(list[str], OmegaConf.to_container(hc.overrides.task, resolve=False))
    job = JobInfo(output_dir=hc.runtime.output_dir, task_overrides=overrides,
                  choices=dict(hc.runtime.choices), multirun=multirun,
                  sweep_dir=str(hc.sweep.dir) if multirun else None,
                  num=hc.job.num if multirun else 0)

    def resolve() -> tuple[dict[str, Any], dict[str, Any]]:
        try:
            resolved = OmegaConf.to_container(dict_cfg, resolve=True, throw_on_missing=True)
            unresolved = OmegaConf.to_container(dict_cfg, resolve=False)
            assert isinstance(resolved, dict) and isinstance(unresolved, dict)  # a DictConfig
            return cast(dict[str, Any], resolved), cast(dict[str, Any], unresolved)
        except MissingMandatoryValue as e:
            raise ConfigError(f"config {e.full_key}: missing value "
                              f"(set it with {e.full_key}=...)") from None
        except OmegaConfBaseException as e:
            raise ConfigError(" ".join(str(e).split())) from None

    run_task(job, resolve)


def run_task(job: JobInfo, resolve) -> None:
    """One run (a single run, or one job of a sweep): ``resolve()`` gives the resolved and
    the unresolved configuration, or raises ConfigError."""
    from omegaconf import OmegaConf

    from raglab.commands.compose import shipped_defaults
    from raglab.config import parse_run_config
    from raglab.errors import ConfigError, UserError
    from raglab.report.summary import config_diff, job_line
    from raglab.runner.components import build_tracker
    from raglab.runner.naming import job_name, override_key
    from raglab.runner.run import Run
    from raglab.runner.summary import error_rate_exceeded, print_summary
    from raglab.secrets import (
        redact,
        register,
        scrub,
        scrub_obj,
        scrub_output_streams,
        secret_values,
    )
    from raglab.tracking.errors import TrackingError, tracking_failed

    run_dir = Path(job.output_dir).resolve()
    multirun = job.multirun
    ctx = sweep_context() if multirun else {}
    tracker = None
    cfg: Any = None
    scrub_output_streams()
    _sigterm_as_interrupt()
    try:
        resolved, unresolved = resolve()
        register(secret_values(resolved, unresolved))
        cfg = parse_run_config(resolved)
        if cfg.dataset._named_after_cases:  # not the demo's data: never called "demo"
            resolved["dataset"]["name"] = cfg.dataset.name
        public = scrub_obj(redact(resolved))
        swept = list(ctx.get("keys") or [])  # a job of a sweep: named by what it sweeps
        keys = swept or [override_key(o) for o in job.task_overrides]
        defaults = shipped_defaults()
        name = scrub(job_name(cfg.run_name, public, keys, dict(job.choices),
                              redact(defaults) if defaults else {}, swept))
        diffs = config_diff(redact(defaults), public) if defaults else []
        sweep_dir = None
        if multirun:
            assert job.sweep_dir is not None  # task() sets it for every sweep job
            sweep_dir = str(Path(job.sweep_dir).resolve())
        # the sweep's parent, when this job makes it, is named as the sweep's end names it
        tracker = build_tracker(cfg, public, name, sweep_dir,
                                scrub(str(cfg.run_name or ctx.get("name") or ""))
                                if multirun else "")
        tracker.diffs = diffs
        yaml_text = OmegaConf.to_yaml(OmegaConf.create(public))
        run = Run(cfg, run_dir, yaml_text, name=name, diffs=diffs, config=public,
                  sequential=_sequential(cfg))
        tracker.check()
        metrics = run.execute(tracker)
        try:
            tracker.finished(run_dir)
        except TrackingError:
            raise
        except Exception as e:  # noqa: BLE001 - the store, not the run, failed
            raise tracking_failed(e, run_dir, cfg) from None
    except TrackingError as e:  # the run directory is complete: only the logging is left
        if tracker is not None:
            _quiet(tracker.failed, str(e))
        fail(str(e), 1)
    except ConfigError as e:  # exit 2, and no run directory left for nothing
        if tracker is not None:
            tracker.failed(str(e))
        _fail_config(str(e), run_dir)
    except UserError as e:  # the one place a user's mistake ends this command
        if tracker is not None:
            _quiet(tracker.failed, str(e))
        _remove_if_empty(run_dir)  # e.g. a cases file not found: the run wrote nothing
        # 2: a usage or input error; 1: a negative outcome; 3: metric versions differ
        fail(str(e), getattr(e, "exit_code", 2))
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM
        _second_signal_exits()
        if tracker is not None:
            _quiet(tracker.killed)
        print(f"raglab: interrupted; records kept in {run_dir / 'records.jsonl'}; "
              "run the same command again to resume (the same hydra.run.dir, or "
              "hydra.sweep.dir for a sweep)", file=sys.stderr)
        _exit_now(130)
    except Exception as e:  # a bug: one line (the traceback with RAGLAB_DEBUG=1)
        if tracker is not None:
            _quiet(tracker.failed, f"{type(e).__name__}: {e}")
        if os.environ.get("RAGLAB_DEBUG") == "1":
            raise
        if type(e).__module__.split(".")[0] == "mlflow":  # the store, not raglab, failed
            fail(str(_store_failed(e, cfg, run_dir)), 1)
        fail(f"{type(e).__name__}: {clip_line(e, 500)} (an unexpected error; "
             "records so far are kept, run again to resume; RAGLAB_DEBUG=1 shows the "
             "traceback)", 1)
    if cfg.dataset._named_after_cases and (not multirun or job.num == 0):  # said once
        print(f"raglab: note: the dataset's files are not the shipped set's: it is named "
              f"{cfg.dataset.name!r} after its cases file (set dataset.name, or raglab init "
              "NAME to name it once)", file=sys.stderr, flush=True)
    over = error_rate_exceeded(metrics, cfg.max_error_rate)
    if over:
        OVER_ERROR_RATE.append(run_dir)
    if multirun:  # one line per job; the sweep callback prints the table at the end
        total = ctx.get("jobs") or "?"
        print(job_line(job.num, total, name, metrics["overall"]), flush=True)
        if over:
            print(f"raglab: error: job {job.num}: {over}", file=sys.stderr, flush=True)
        return
    from raglab.errors import UserError

    bad_calibration = None
    try:
        calibration = _calibration(cfg, metrics["metric_versions"])
    except UserError as e:  # a hand-edited calibration record: the run itself is finished
        bad_calibration = e
        from raglab.calibration.records import NOT_GRADED

        calibration = {f: "not graded" if f in NOT_GRADED else "calibration records unreadable"
                       for f in metrics["metric_versions"]}
    print_summary(metrics, run_dir, calibration)
    assert tracker is not None  # built in the try above; every way out of it exits
    where = tracker.where()
    if where:
        print(where)
    if bad_calibration is not None:
        fail(f"{bad_calibration} (the run finished: {run_dir})", 2)
    if over:
        fail(over, 1)


def _store_failed(e: BaseException, cfg: Any, run_dir: Path) -> Exception:
    """The one line of an MLflow store that failed during a run (e.g. its API answered
    HTTP 500): the store is named, what the run wrote is kept, the same command resumes."""
    from raglab.errors import NegativeOutcome
    from raglab.tracking.uris import redact_uri

    reason = clip_line(e, 300) or type(e).__name__
    uri = redact_uri(str(getattr(getattr(cfg, "tracking", None), "uri", "") or ""))
    return NegativeOutcome(f"MLflow tracking store {uri} failed ({type(e).__name__}: "
                           f"{reason}); what the run wrote is kept in {run_dir}: run the "
                           "same command again once the store works, or use tracking=none")


#: run directories whose error rate exceeded max_error_rate (a sweep exits 1 at the end)
OVER_ERROR_RATE: list[Path] = []


def _sequential(cfg: Any) -> Any:
    """A sequential run's checks and baseline (``sequential.against``), else None."""
    seq = cfg.sequential
    if seq.against is None:
        return None
    from raglab.commands.decide import _gates_root
    from raglab.compare.gates import load_gate_set
    from raglab.compare.load import load_run
    from raglab.sequential.run import Sequential

    ref = seq.gates
    if not ref.endswith((".yaml", ".yml")) and "/" not in ref:
        # a set's file by name: read as a file (composing it with Hydra inside this Hydra
        # app would initialise Hydra twice); an unknown name is load_gate_set's one line
        own = _gates_root(ref) / "gates" / f"{ref}.yaml"
        ref = str(own) if own.is_file() else ref
    name, gates, _ = load_gate_set(ref, [], _gates_root(seq.gates))
    return Sequential(seq, gates, name, load_run(seq.against, getattr(cfg.tracking, "uri",
                                                                       None)))


def _quiet(fn, *args) -> None:
    """Mark the tracked run's status, best effort (the store may be what failed)."""
    try:
        fn(*args)
    except Exception:  # noqa: BLE001
        pass


def _sigterm_as_interrupt() -> None:
    """SIGTERM ends a run as Ctrl-C does: records kept, MLflow run marked KILLED. A second
    one, while the first is handled, ends the process at once (:func:`_second_signal_exits`)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _first_sigterm)


def _first_sigterm(signum: int, frame: Any) -> None:
    import signal

    signal.signal(signal.SIGTERM, _exit_at_once)
    raise KeyboardInterrupt


def _second_signal_exits() -> None:
    """From now on Ctrl-C or SIGTERM ends the process at once (CI sends SIGTERM again, or
    the user presses Ctrl-C twice): no traceback from wherever the signal lands."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _exit_at_once)


def _exit_at_once(signum: int, frame: Any) -> None:
    """Exit 130 at once. Nothing is lost: each record line was flushed as it was written
    (a torn last one is dropped by the resume), and an MLflow run left RUNNING is continued
    by the resume."""
    os.write(2, b"raglab: interrupted again: stopped at once; run the same command again to "
                b"resume (the same hydra.run.dir, or hydra.sweep.dir for a sweep)\n")
    os._exit(130)


def _exit_now(code: int) -> None:
    """Exit without waiting for threads still running the system's code: a blocking
    ``answer()`` (one that sleeps, or waits on a socket) cannot be stopped, and the
    interpreter would wait for it at exit. The records are closed and the tracked run
    marked by now; only the terminal's output is left to flush."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _sweep_title(jobs: list[list[str]], keys: list[str]) -> str:
    """The sweep's own name (:func:`raglab.runner.naming.sweep_name`): its system, each
    swept key with its values, the other settings of its jobs that differ from the
    defaults, read from its first job's redacted configuration."""
    from raglab.commands.common import conf_dir
    from raglab.commands.compose import compose_config, shipped_defaults
    from raglab.config import parse_run_config
    from raglab.runner.naming import override_key, override_values, sweep_name
    from raglab.secrets import is_secret_key, redact, scrub, scrub_obj

    resolved = compose_config(jobs[0])
    cfg = parse_run_config(resolved)
    if cfg.dataset._named_after_cases:  # as the run names it (run_task)
        resolved["dataset"]["name"] = cfg.dataset.name
    public = scrub_obj(redact(resolved))
    groups = {p.name for p in conf_dir().iterdir() if p.is_dir()} | {"experiment"}
    settings = [override_values(job) for job in jobs]
    values = {k: [s.get(k, "") for s in settings] for k in keys
              if not any(is_secret_key(part) for part in k.split("."))}
    fixed = [o for o in jobs[0] if "=" in o and override_key(o) not in keys]
    choices = {k: str(v) for k, v in settings[0].items() if k in groups and k not in keys}
    defaults = shipped_defaults()
    return scrub(sweep_name(list(values), values, public, fixed, choices,
                            redact(defaults) if defaults else {}))


def main(argv: list[str]) -> None:
    from raglab.commands.compose import split_argv
    from raglab.errors import ConfigError

    multirun, overrides, plain = split_argv(argv)
    from raglab.secrets import override_secrets, register, scrub_output_streams

    register(override_secrets(overrides))  # before any message could name an override
    scrub_output_streams()
    if {"--help", "-h"} & set(argv) and not {"--hydra-help", "--info", "-i"} & set(argv):
        from raglab.commands.compose import ComposeError, run_help

        try:
            print(run_help([a for a in overrides if a not in ("--help", "-h")]))
        except ComposeError as e:
            fail(str(e), 2)
        return
    if plain and multirun:  # compose and validate every job before Hydra makes anything
        from raglab.commands.compose import sweep_params, validate_jobs
        from raglab.runner.naming import swept_keys

        try:  # the command line and the hydra.sweeper.params of its configuration
            params = sweep_params(overrides)
            jobs = validate_jobs(overrides, multirun, params)
        except ConfigError as e:
            fail(str(e), 2)
        keys = swept_keys(overrides, params)
        os.environ[SWEEP_ENV] = json.dumps({"keys": keys, "jobs": len(jobs),
                                            "name": _sweep_title(jobs, keys)})
    import hydra

    from raglab.commands.common import conf_dir
    from raglab.commands.compose import register_schema_defaults

    register_schema_defaults()  # before Hydra composes (launcher workers inherit the store)
    sys.argv = ["raglab run", *argv]
    app = hydra.main(config_path=str(conf_dir()), config_name="config",
                     version_base="1.3")(task)
    full = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises: raglab prints its own one line
    try:
        app()
    except OSError as e:  # e.g. Hydra could not make the run directory
        if full:
            raise
        _fail_composing(e, overrides)  # (a missing config choice is an OSError too)
        from raglab.errors import storage_error

        fail(str(storage_error(e, "the run directory")), 2)
    except Exception as e:  # noqa: BLE001
        if full:
            raise
        _fail_composing(e, overrides)
        fail(f"{type(e).__name__}: {clip_line(e, 500)}", 1)
    finally:
        if not full:
            os.environ.pop("HYDRA_FULL_ERROR", None)
    if multirun:
        from raglab.runner import sweep

        # the jobs of this process, and those of other processes read back at the sweep's end
        over = list(dict.fromkeys(p.resolve() for p in (*OVER_ERROR_RATE,
                                                         *sweep.OVER_ERROR_RATE)))
        if over:
            fail(f"{len(over)} job(s) exceeded max_error_rate: "
                 + ", ".join(str(p) for p in over), 1)


def _fail_composing(e: BaseException, overrides: list[str]) -> None:
    """Exit 2 with one line when ``e`` is an error composing a single run's configuration
    (which Hydra composes itself); return otherwise."""
    from raglab.commands.compose import compose_error

    err = compose_error(e, overrides)
    if err is not None:
        fail(str(err), 2)


def _calibration(cfg, versions: dict[str, str]) -> dict[str, str]:
    """Each family version's kappa (raglab calibrate), from cache_dir or the tracking store."""
    from raglab.calibration.records import lookup

    tracked = None
    from raglab.runner.components import tracks

    if tracks(cfg):
        from raglab.tracking.standalone import calibration_finder

        tracked = calibration_finder(cfg.tracking.uri)
    return lookup(versions, cfg.cache_dir, tracked)
