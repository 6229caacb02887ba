"""Composing run configurations before Hydra starts any job (Hydra's compose API).

``raglab run`` composes and validates the configuration of every job of a sweep (one job
for a single run) before the Hydra application creates a directory or runs anything, so a
bad value in job 3 of a sweep fails at once, with one line, and no job runs. The same
composition gives the shipped defaults a run is compared with (its "config differences"),
and the swept keys that name each job.
"""

from __future__ import annotations

import re
from typing import Any

from raglab.commands.common import conf_dir
from raglab.errors import ConfigError
from raglab.runner.naming import job_overrides
from raglab.secrets import clip_line

#: Hydra command-line flags after which raglab leaves everything to Hydra itself
_HYDRA_FLAGS = {"--help", "-h", "--hydra-help", "--version", "--cfg", "-c", "--resolve",
                "--package", "-p", "--info", "-i", "--config-path", "-cp", "--config-name",
                "-cn", "--config-dir", "-cd", "--shell-completion", "-sc",
                "--experimental-rerun"}
MULTIRUN_FLAGS = ("-m", "--multirun")


class ComposeError(ConfigError):
    """A configuration that does not compose or validate; ``str()`` is the one line."""


def split_argv(argv: list[str]) -> tuple[bool, list[str], bool]:
    """``(multirun, overrides, plain)``: ``plain`` is False when a Hydra flag other than
    ``-m`` is present (raglab then does not compose ahead)."""
    multirun = any(a in MULTIRUN_FLAGS for a in argv)
    plain = not any(a.split("=")[0] in _HYDRA_FLAGS for a in argv)
    return multirun, [a for a in argv if a not in MULTIRUN_FLAGS], plain


def register_schema_defaults() -> None:
    """Before anything composes: every schema's defaults in Hydra's ConfigStore (the
    ``/schema/...`` nodes the files of ``conf/`` start from, :func:`raglab.config.
    register_schema_defaults`), and the resolver of the help's list of config groups
    (the ``schema`` nodes are no choice a user makes). Idempotent."""
    import warnings

    from omegaconf import OmegaConf

    from raglab.config import register_schema_defaults as store

    # conf/config.yaml puts ./conf on the search path (the user's own configs); a working
    # directory without one is the usual case, not worth Hydra's warning
    warnings.filterwarnings("ignore", message=r"provider=hydra\.searchpath in main, "
                            r"path=conf is not available")
    store(command_sections())
    if not OmegaConf.has_resolver("raglab_config_groups"):
        OmegaConf.register_new_resolver("raglab_config_groups", _config_groups)


def command_sections() -> dict[str, type[Any]]:
    """The schemas of the config groups that only a command reads (composed by Hydra too)."""
    from raglab.cases.draft import ClaudeDrafterCfg, OpenAIDrafterCfg
    from raglab.compare.gates import GateSet
    from raglab.monitor.traffic import MonitorCfg

    return {"monitor": MonitorCfg, "gates": GateSet, "drafter/claude": ClaudeDrafterCfg,
            "drafter/openai": OpenAIDrafterCfg}


def run_help(overrides: list[str]) -> str:
    """``raglab run --help``: Hydra's help page of the composed configuration, with the
    template of ``hydra.help`` (in conf/config.yaml). Rendered here because Hydra's own
    lists every config group twice, schema nodes included, for the template's
    ``$APP_CONFIG_GROUPS``/``$HYDRA_CONFIG_GROUPS``, which raglab's template does not show:
    seconds for nothing."""
    import string

    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    compose(overrides)  # a mistake in the overrides is one line (ComposeError)
    GlobalHydra.instance().clear()
    with initialize_config_dir(str(conf_dir()), version_base="1.3"):
        cfg = hydra_compose("config", overrides=overrides, return_hydra_config=True)
    help_cfg = cfg.hydra.help
    task = OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"])
    template = string.Template(str(help_cfg.template))
    return template.safe_substitute(CONFIG=OmegaConf.to_yaml(task, resolve=False))


def _config_groups() -> str:
    """``GROUP: CHOICE, ...`` lines of the folders of conf/ (Hydra's $APP_CONFIG_GROUPS
    without the schema nodes)."""
    from pathlib import Path

    groups: dict[str, set[str]] = {}
    own = Path("conf")  # the working directory's own configs (on the search path)
    for root in (conf_dir(), *([own] if own.is_dir() else [])):
        for d in sorted(p for p in root.rglob("*") if p.is_dir()):
            names = {f.stem for f in d.glob("*.yaml")}
            if names:
                groups.setdefault(d.relative_to(root).as_posix(), set()).update(names)
    lines = [f"{g}: {', '.join(sorted(n))}" for g, n in sorted(groups.items())
             if not g.startswith("schema")]
    return "\n".join(lines) + "\n"


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _compose(overrides: list[str]) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_schema_defaults()
    if GlobalHydra.instance().is_initialized():
        return compose("config", overrides=overrides)
    with initialize_config_dir(str(conf_dir()), version_base="1.3"):
        return compose("config", overrides=overrides)


def compose(overrides: list[str]) -> Any:
    """The composed DictConfig; a ComposeError (a ConfigError, one line) for a bad override."""
    return _composed(overrides, resolve=False)


def compose_config(overrides: list[str]) -> dict[str, Any]:
    """The resolved configuration (``hydra`` section dropped) or a one-line ComposeError."""
    data = _composed(overrides, resolve=True)
    data.pop("hydra", None)
    return data


def _composed(overrides: list[str], resolve: bool) -> Any:
    from omegaconf import OmegaConf

    try:
        cfg = _compose(overrides)
        if not resolve:
            return cfg
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except Exception as e:
        err = compose_error(e, overrides)
        if err is None:
            raise
        raise err from None


def compose_error(e: BaseException, overrides: list[str]) -> ComposeError | None:
    """The one-line error for a configuration that Hydra or OmegaConf could not compose
    (None: not such an error)."""
    from hydra.errors import (
        ConfigCompositionException,
        MissingConfigException,
        OverrideParseException,
    )
    from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

    if isinstance(e, MissingConfigException):
        return ComposeError(_missing_choice(e, overrides))
    if isinstance(e, OverrideParseException):
        return ComposeError(f"override: {_first_line(e)}")
    if isinstance(e, ConfigCompositionException):
        return ComposeError(_not_composed(e, overrides))
    if isinstance(e, MissingMandatoryValue):
        return ComposeError(f"config {e.full_key}: missing value (set it with "
                            f"{e.full_key}=...)")
    if isinstance(e, OmegaConfBaseException):
        return ComposeError(" ".join(str(e).split()))
    return None


def _missing_choice(e: Exception, overrides: list[str]) -> str:
    m = re.search(r"Could not find '([^']+)/([^'/]+)'", str(e))
    options = re.findall(r"^\t(\S+)$", str(e).split("Config search path")[0], re.M)
    if not m:
        return f"config: {_first_line(e)}"
    group, choice = m.group(1), m.group(2)
    valid = ", ".join(options) if options else "none"
    return f"config {group}={choice}: unknown choice (valid: {valid})"


def _not_composed(e: Exception, overrides: list[str]) -> str:
    m = re.search(r"Could not override '([^']+)'", str(e))
    if not m:
        return f"config: {_first_line(e)}"
    key = m.group(1)
    parent, _, _leaf = key.rpartition(".")
    valid = ""
    try:  # the keys that do exist there, from the configuration without this override
        node: Any = compose_config([o for o in overrides if not _sets(o, key)])
        for part in parent.split(".") if parent else []:
            node = node[part]
        if isinstance(node, dict) and node:
            valid = f" (valid: {', '.join(str(k) for k in node)})"
        elif isinstance(node, dict):  # a free-form mapping (options, headers): new keys
            valid = f" ({parent} starts empty: add a key with +{key}=VALUE)"
    except (ComposeError, KeyError, TypeError):
        pass
    return f"config {key}: unknown key{valid}"


def _sets(override: str, key: str) -> bool:
    return override.split("=", 1)[0].lstrip("+~") == key


def sweep_params(overrides: list[str]) -> dict[str, str]:
    """The ``hydra.sweeper.params`` of a sweep's configuration (its command line composed as
    Hydra composes a multirun's, a swept config group left at its default), for a basic
    sweeper; ComposeError when the command line does not compose."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from raglab.runner.naming import sweeper_params

    register_schema_defaults()

    def master() -> Any:
        hydra = GlobalHydra.instance().hydra
        assert hydra is not None  # initialized just above or by the caller
        return hydra.compose_config("config", overrides, run_mode=RunMode.MULTIRUN,
                                    from_shell=True, with_log_configuration=False)

    try:
        if GlobalHydra.instance().is_initialized():
            cfg = master()
        else:
            with initialize_config_dir(str(conf_dir()), version_base="1.3"):
                cfg = master()
        return sweeper_params(cfg.hydra.sweeper)
    except Exception as e:
        err = compose_error(e, overrides)
        if err is None:
            raise
        raise err from None


def validate_jobs(overrides: list[str], multirun: bool,
                  params: dict[str, str] | None = None) -> list[list[str]]:
    """Compose and validate every job (``params``: the sweep's ``hydra.sweeper.params``);
    ComposeError (one line, naming the job of a sweep)."""
    from raglab.config import parse_run_config
    from raglab.errors import UserError

    jobs = job_overrides(overrides, multirun, params)
    for num, job in enumerate(jobs):
        where = f"job {num} ({' '.join(job)}): " if multirun and len(jobs) > 1 else ""
        try:
            parse_run_config(compose_config(job))
        except ComposeError as e:
            raise ComposeError(where + str(e)) from None
        except UserError as e:
            raise ComposeError(where + str(e)) from None
    return jobs


_DEFAULTS: dict[str, Any] | None = None


def shipped_defaults() -> dict[str, Any] | None:
    """The configuration of ``raglab run`` with no override (None if it does not compose),
    composed once per process."""
    global _DEFAULTS
    if _DEFAULTS is None:
        try:
            _DEFAULTS = compose_config([])
        except ComposeError:
            return None
    return _DEFAULTS


def run_hydra_app(app: Any, overrides: list[str], what: str) -> None:
    """Run a ``@hydra.main`` application of a command (``monitor``, ``calibrate``) so that
    what Hydra itself fails on ends with one line too: a configuration that does not compose
    (``monitor.foo=1``, ``monitor=nosuch``: exit 2, as for ``raglab run``), an output
    directory it cannot make (exit 2). ``HYDRA_FULL_ERROR=1`` keeps Hydra's own report."""
    import os

    from raglab.commands.common import fail
    from raglab.errors import storage_error

    full = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises: raglab prints its own one line
    try:
        app()
    except Exception as e:  # noqa: BLE001 - each way out is one line
        if full:
            raise
        err = compose_error(e, overrides)
        if err is not None:
            fail(str(err), 2)
        if isinstance(e, OSError):  # e.g. Hydra could not make the output directory
            fail(str(storage_error(e, f"the {what} directory")), 2)
        if os.environ.get("RAGLAB_DEBUG") == "1":
            raise
        fail(f"{type(e).__name__}: {clip_line(e, 500)} (an unexpected error; "
             "RAGLAB_DEBUG=1 shows the traceback)", 1)
    finally:
        if not full:
            os.environ.pop("HYDRA_FULL_ERROR", None)
