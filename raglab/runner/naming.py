"""Short run names built from the (redacted) configuration: ``size=128 k=5``.

A name lists the value of each key the user set (for a sweep: each swept key) that differs
from the composed defaults, read back from the redacted configuration rather than from the
command line, so a secret passed as an override can never reach a run name. A key is shown
by its last part (``chunker.size`` -> ``size``) unless two keys share it; a path by its file
name; a URL by its host; a config group by its choice; the dataset by its name. At most 60
characters; a short hash of the settings is appended when the name shows less than them.

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


#: the longest run name (MLflow's run table cuts longer ones, so two names would look alike)
MAX_NAME = 60
#: the longest value a name shows (cut with an ellipsis)
MAX_VALUE = 24


def _show(value: Any) -> str:
    return _shown(value)[0]


def _shown(value: Any) -> tuple[str, bool]:
    """The value as a name shows it, and whether that lost anything: a URL as its host
    (``http://127.0.0.1:8000/v1`` -> ``127.0.0.1:8000``), a path as its file name."""
    if isinstance(value, bool):
        return ("true" if value else "false"), False
    if value is None:
        return "null", False
    if isinstance(value, float):
        return f"{value:g}", f"{value:g}" != repr(value)
    if isinstance(value, (list, tuple)):
        items = [_shown(v) for v in value]
        return "[" + ",".join(t for t, _ in items) + "]", any(lossy for _, lossy in items)
    text, cut = _shown_text(str(value))
    if len(text) > MAX_VALUE:  # one long value must not hide the others
        return text[:MAX_VALUE - 1] + "…", True
    return text, cut


def _shown_text(text: str) -> tuple[str, bool]:
    if "://" in text:
        from urllib.parse import urlsplit

        try:
            host = urlsplit(text).netloc.rpartition("@")[2]  # never the user:password part
        except ValueError:
            host = ""
        if host:
            return host, host != text
    elif "/" in text:  # a path: its file name
        name = PurePath(text).name or text
        return name, name != text
    return text, False


def name_parts(public: Mapping[str, Any], keys: Iterable[str],
               choices: Mapping[str, Any] | None = None,
               defaults: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """``[(key, shown value)]`` for each naming key, secrets and bookkeeping keys left out
    (``defaults``: the composed defaults; a key set to its default value is left out)."""
    return [(k, shown) for k, shown, _, _ in _parts(public, keys, choices, defaults)]


def _parts(public: Mapping[str, Any], keys: Iterable[str],
           choices: Mapping[str, Any] | None = None,
           defaults: Mapping[str, Any] | None = None, swept: bool = False
           ) -> list[tuple[str, str, str, bool]]:
    """``[(key, shown value, full value, shortened)]``: :func:`name_parts` with the values
    unshortened. The files of a dataset (``dataset.cases=...``) are shown as its name,
    once (shortened: the name does not say which files). ``swept``: the keys of a sweep,
    each named even at its default value (every job shows every swept key)."""
    choices = choices or {}
    if swept:
        defaults, compare = None, defaults
    else:
        compare = defaults
    out: list[tuple[str, str, str, bool]] = []
    seen: set[str] = set()
    for key in keys:
        key = override_key(key)
        if key.startswith("dataset.") and compare is not None:
            key = "dataset"  # the dataset's files and settings: its name says which
        if key in seen or key.split(".")[0].split("/")[0] in _NOT_NAMING:
            continue
        seen.add(key)
        if any(is_secret_key(part) for part in key.split(".")):
            continue
        if key in choices and "." not in key and not (key == "dataset" and compare):
            choice = choices[key]
            if choice is not None and not _is_default(defaults, key, choice, group=True):
                shown, lossy = _shown(choice)
                out.append((key, shown, repr(choice), lossy))
            continue
        found, value = _lookup(public, key)
        if not found or value == REDACTED:
            continue
        if key == "dataset" and isinstance(value, Mapping):
            same = defaults is not None and all(
                _lookup(defaults, f"dataset.{k}") == (True, v) for k, v in value.items())
            if swept:
                same = False
            if not same:
                out.append((key, _show(value.get("name")), repr(sorted(value.items())), True))
            continue
        if _is_default(defaults, key, value):
            continue
        if isinstance(value, Mapping):
            if "name" not in value:
                continue
            value = value["name"]
        shown, lossy = _shown(value)
        out.append((key, shown, repr(value), lossy))
    return out


def _is_default(defaults: Mapping[str, Any] | None, key: str, value: Any,
                group: bool = False) -> bool:
    if defaults is None:
        return False
    found, default = _lookup(defaults, key)
    if group and found and isinstance(default, Mapping):
        return default.get("name") == value
    return found and default == value


def short_labels(keys: list[str]) -> dict[str, str]:
    """Each key by its last part, or whole where two keys share the last part."""
    last = [k.split(".")[-1] for k in keys]
    return {k: (lp if last.count(lp) == 1 else k) for k, lp in zip(keys, last)}


def _leaves(node: Any, prefix: str = "") -> Iterable[str]:
    if isinstance(node, Mapping):
        for k, v in node.items():
            yield from _leaves(v, f"{prefix}{k}.")
    elif prefix:
        yield prefix[:-1]


def run_name(public: Mapping[str, Any], keys: Iterable[str],
             choices: Mapping[str, Any] | None = None, limit: int = MAX_NAME,
             defaults: Mapping[str, Any] | None = None, swept: bool = False) -> str:
    """``size=128 k=5``: the settings that differ from the composed ``defaults``, each by
    its last part (whole when another setting shares it), a URL as its host, a file as its
    base name; at most ``limit`` characters. When the name shows less than the settings
    (a shortened value, an ambiguous label, a cut), a short hash of them all is appended,
    so two runs that differ in any of them never share a name. ``defaults`` when nothing
    was set. ``swept``: a sweep's job, named by every swept key, at its default or not."""
    import hashlib

    parts = _parts(public, keys, choices, defaults, swept)
    if not parts:
        return "defaults"
    labels = short_labels([k for k, _, _, _ in parts])
    lasts = [leaf.split(".")[-1] for leaf in _leaves(public)]
    lossy = any(cut for _, _, _, cut in parts) or any(
        labels[k] != k and lasts.count(labels[k]) > 1 for k, _, _, _ in parts)
    name = " ".join(f"{labels[k]}={shown}" for k, shown, _, _ in parts)
    if not lossy and len(name) <= limit:
        return name
    digest = hashlib.sha256("\n".join(f"{k}={full}" for k, _, full, _ in parts)
                            .encode()).hexdigest()[:6]
    room = limit - len(digest) - 2
    return (name if len(name) <= room else name[:room - 1] + "…") + " #" + digest


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
