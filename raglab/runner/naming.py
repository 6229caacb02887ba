"""Short run names built from the (redacted) configuration: ``size=128 k=5``.

A name lists the value of each key the user set (for a sweep: each swept key), read back
from the redacted configuration rather than from the command line, so a secret passed as an
override can never reach a run name. A key is shown by its last part (``chunker.size`` ->
``size``) unless two keys share it; a path by its file name; a config group by its choice.

A sweep's jobs and swept keys are read from its overrides and the ``hydra.sweeper.params``
of its configuration (an ``experiment/`` file may declare the whole study there) with Hydra's
own override parser and basic sweeper, so job ``N`` here is Hydra's job ``N``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any

from raglab.errors import ConfigError
from raglab.secrets import is_secret_key

#: keys that say where or how a run is recorded, not what it measures
_NOT_NAMING = ("hydra", "tracking", "cache_dir", "progress", "concurrency", "run_name",
               "plugins")
REDACTED = "***"


def override_key(override: str) -> str:
    """``+a.b=1`` -> ``a.b``; ``hydra/launcher=joblib`` -> ``hydra/launcher``."""
    return override.split("=", 1)[0].lstrip("+~")


def _lookup(cfg: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_show(v) for v in value) + "]"
    text = str(value)
    if "/" in text and "://" not in text:  # a path: its file name
        text = PurePath(text).name or text
    return text


def name_parts(public: Mapping[str, Any], keys: Iterable[str],
               choices: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """``[(key, shown value)]`` for each naming key, secrets and bookkeeping keys left out."""
    choices = choices or {}
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for key in keys:
        key = override_key(key)
        if key in seen or key.split(".")[0].split("/")[0] in _NOT_NAMING:
            continue
        seen.add(key)
        if any(is_secret_key(part) for part in key.split(".")):
            continue
        if key in choices and "." not in key:  # a config group: its chosen option
            choice = choices[key]
            if choice is not None:
                out.append((key, _show(choice)))
            continue
        found, value = _lookup(public, key)
        if not found or value == REDACTED:
            continue
        if isinstance(value, Mapping):
            if "name" not in value:
                continue
            value = value["name"]
        out.append((key, _show(value)))
    return out


def short_labels(keys: list[str]) -> dict[str, str]:
    """Each key by its last part, or whole where two keys share the last part."""
    last = [k.split(".")[-1] for k in keys]
    return {k: (lp if last.count(lp) == 1 else k) for k, lp in zip(keys, last)}


def run_name(public: Mapping[str, Any], keys: Iterable[str],
             choices: Mapping[str, Any] | None = None, limit: int = 200) -> str:
    """``size=128 k=5``; ``defaults`` when nothing was set."""
    parts = name_parts(public, keys, choices)
    if not parts:
        return "defaults"
    labels = short_labels([k for k, _ in parts])
    name = " ".join(f"{labels[k]}={v}" for k, v in parts)
    return name if len(name) <= limit else name[:limit - 1] + "…"


def sweep_name(keys: list[str]) -> str:
    """The parent run of a sweep: ``size × k sweep``."""
    labels = short_labels([override_key(k) for k in keys])
    return (" × ".join(labels.values()) + " sweep") if labels else "sweep"


# ---- a sweep's jobs (Hydra's override grammar and its basic sweeper's job order) --------
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def sweeper_params(sweeper: Any) -> dict[str, str]:
    """``hydra.sweeper.params`` of a composed configuration (``{KEY: "v1,v2"}``) when its
    sweeper is Hydra's basic one, whose job order raglab reproduces; ``{}`` otherwise."""
    if sweeper is None:
        return {}
    from omegaconf import DictConfig, OmegaConf

    if isinstance(sweeper, DictConfig):
        sweeper = OmegaConf.to_container(sweeper, resolve=True)
    if not isinstance(sweeper, Mapping) or sweeper.get("_target_") != BASIC_SWEEPER:
        return {}
    params = sweeper.get("params") or {}
    return {str(k): _param_text(v) for k, v in params.items()} if isinstance(params, Mapping) \
        else {}


def _param_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def sweep_arguments(overrides: list[str], params: Mapping[str, str] | None = None) -> list[str]:
    """What Hydra's basic sweeper expands: ``hydra.sweeper.params`` as ``KEY=VALUE``, then
    the command line's overrides (a key given on both keeps the command line's value)."""
    return [f"{k}={v}" for k, v in (params or {}).items()] + list(overrides)


def _parse(arguments: list[str]) -> list[Any]:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        return OverridesParser.create().parse_overrides(arguments)
    except OverrideParseException as e:
        raise ConfigError(f"override: {str(e).strip().splitlines()[0]}") from None


def job_overrides(overrides: list[str], multirun: bool,
                  params: Mapping[str, str] | None = None) -> list[list[str]]:
    """Each job's overrides, in Hydra's job order (its basic sweeper's cartesian product of
    ``hydra.sweeper.params`` and the command line)."""
    if not multirun:
        return [list(overrides)]
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    batches = BasicSweeper.split_arguments(_parse(sweep_arguments(overrides, params)), None)
    return [job for batch in batches for job in batch]


def swept_keys(overrides: list[str], params: Mapping[str, str] | None = None) -> list[str]:
    """The keys a sweep varies, in Hydra's order (``hydra.sweeper.params`` ``{k: 3,5}`` and
    ``chunker.size=64,128`` -> ``["k", "chunker.size"]``), Hydra's own keys left out. As in
    Hydra's basic sweeper, a key set twice keeps its first place and its last value."""
    try:
        parsed = _parse(sweep_arguments(overrides, params))
    except ConfigError:  # reported by validate_jobs
        return []
    final: dict[str, bool] = {}
    for o in parsed:
        final[o.get_key_element()] = o.is_sweep_override()
    return [k.lstrip("+~") for k, swept in final.items()
            if swept and not k.startswith(("hydra.", "hydra/"))]
