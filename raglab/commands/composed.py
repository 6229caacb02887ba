"""A single run's composed configuration, kept in ``cache_dir`` so that the same command
run again starts without Hydra (importing and composing with it is most of a small run's
start-up).

What is kept is everything a single run takes from Hydra: the resolved configuration, the
run directory pattern, the task overrides and the config-group choices (which name the
run), with the YAML text of its redacted configuration. It is keyed by the overrides'
*shape* and by :func:`conf_key`, a hash of every shipped config file and of raglab's,
Hydra's and OmegaConf's versions and Hydra's installed plugins, so any change to what the
composition depends on composes again. The shape is the overrides with the value of each
plain ``key=PATH`` override of a leaf (a value with a ``/`` and only letters, digits and
``_ . / -``, which Hydra reads as that very string) left out: a run that differs only in
such paths (``system.path=``, ``hydra.run.dir=``, ``dataset.cases=``) takes the kept
configuration with those leaves set to its own values.

Only a configuration that nothing outside those inputs can change is kept (see
:func:`keepable`): no interpolation left in it (an environment variable, another key), a
run directory whose only interpolation is ``${now:...}``, no secret value anywhere, no
plugin module, no Hydra override other than ``hydra.run.dir``, and Hydra's behaviour as
shipped (no ``chdir``, no job environment, logging left alone, no ``.hydra/`` copy). Any
other configuration simply takes Hydra's path every time.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

#: bump when what an entry holds, or how it is used, changes
FORMAT = 1
#: ``cache_dir`` of the shipped config.yaml (a test checks they agree): where an entry is
#: looked for when no override names another
DEFAULT_CACHE_DIR = ".raglab-cache"
_NOW = re.compile(r"\$\{now:([^${}]*)\}")
_CONF_KEY: str | None = None


@dataclass
class JobInfo:
    """What a run takes from Hydra's job configuration."""

    output_dir: str
    task_overrides: list[str]
    choices: dict[str, Any]
    multirun: bool = False
    sweep_dir: str | None = None
    num: int = 0
    #: a run from a kept composition (its config.yaml written by :func:`yaml_text`)
    kept: bool = False
    #: the kept YAML text of exactly this configuration (no path value changed), if any
    kept_yaml: str | None = field(default=None, repr=False)


def _package_file(name: str, *parts: str) -> bytes:
    """A file of an installed package, found without importing the package."""
    from importlib.util import find_spec

    try:
        spec = find_spec(name)
    except (ImportError, ValueError):
        return b""
    for loc in (spec.submodule_search_locations or []) if spec else []:
        try:
            return Path(loc, *parts).read_bytes()
        except OSError:
            continue
    return b""


def _plugins() -> str:
    """Hydra's installed plugin modules (names and modification times)."""
    from importlib.util import find_spec

    try:
        spec = find_spec("hydra_plugins")
    except (ImportError, ValueError):
        return ""
    out = []
    for loc in (spec.submodule_search_locations or []) if spec else []:
        try:
            for p in sorted(Path(loc).iterdir()):
                out.append(f"{p.name}:{p.stat().st_mtime_ns}")
        except OSError:
            continue
    return ",".join(out)


def conf_key() -> str:
    """A hash of everything a composition depends on besides its overrides: every file of
    raglab's config directory, raglab's version, Hydra's and OmegaConf's version files (read,
    not imported) and Hydra's plugins."""
    global _CONF_KEY
    if _CONF_KEY is not None:
        return _CONF_KEY
    import raglab
    from raglab.commands.common import conf_dir

    h = hashlib.sha256()
    h.update(f"{raglab.__version__}\n".encode())
    h.update(_package_file("hydra", "__init__.py") + b"\0")
    h.update(_package_file("omegaconf", "version.py") + b"\0")
    h.update(_plugins().encode() + b"\0")
    root = conf_dir()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    _CONF_KEY = h.hexdigest()[:16]
    return _CONF_KEY


def read_kept(path: Path) -> Any:
    """A JSON file raglab keeps in ``cache_dir`` (None when it is missing or unreadable:
    what it holds is composed again)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RuntimeError):  # RuntimeError: ~user of no known home
        return None


def write_kept(path: Path, obj: Any) -> None:
    """Keep ``obj`` in ``path``, best effort: a cache that cannot be written only means
    composing again (a failed write is a StorageError)."""
    from raglab.data.io import atomic_write_json
    from raglab.errors import StorageError

    try:
        atomic_write_json(path, obj)
    except (OSError, StorageError, ValueError, TypeError):
        pass


def _override_key(o: str) -> str:
    return o.split("=", 1)[0]


_PATH = re.compile(r"[A-Za-z0-9_./-]*/[A-Za-z0-9_./-]*")
#: what stands for a path-like value in a shape
_ANY_PATH = "\0PATH"


def _is_leaf(key: str) -> bool:
    """Whether an override key names a value (``system.path``, ``k``), not a config group
    (``system``)."""
    from raglab.commands.common import conf_dir

    try:
        return "." in key or not (conf_dir() / key).is_dir()
    except (OSError, ValueError):  # e.g. a name too long for a file: no group of raglab's
        return True


def _substituted(o: str) -> bool:
    """Whether an override is a plain ``leaf=PATH`` whose value a shape leaves out."""
    key, sep, value = o.partition("=")
    return (bool(sep) and key[:1] not in "+~" and _PATH.fullmatch(value) is not None
            and _is_leaf(key))


def shape(overrides: list[str]) -> list[str]:
    """The overrides with each path-like leaf value replaced by a placeholder."""
    return [f"{_override_key(o)}={_ANY_PATH}" if _substituted(o) else o for o in overrides]


def _cache_dir_of(overrides: list[str]) -> str:
    """The ``cache_dir`` the overrides set (the last one wins), else the shipped one."""
    found = DEFAULT_CACHE_DIR
    for o in overrides:
        if _override_key(o).lstrip("+") == "cache_dir":
            found = o.split("=", 1)[1]
    return found


def _entry_path(cache_dir: str, overrides: list[str]) -> Path:
    key = hashlib.sha256(json.dumps([FORMAT, conf_key(), shape(overrides)]).encode())
    return Path(cache_dir).expanduser() / "compose" / f"{key.hexdigest()[:32]}.json"


def _node(o: str) -> str:
    """The key an override sets, without its ``+``/``~`` prefix and ``@package``."""
    return _override_key(o).lstrip("+~").split("@", 1)[0]


def _overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _set_once(overrides: list[str]) -> bool:
    """Whether no path-like leaf is set by more than one override (the key twice, or a key
    above or below it): Hydra takes the last of them, which a substitution of one value in
    place could not follow."""
    subs = [i for i, o in enumerate(overrides) if _substituted(o)]
    return not any(_overlaps(_node(overrides[i]), _node(o)) and _is_leaf(_node(o))
                   for i in subs for j, o in enumerate(overrides) if j != i)


def _overrides_keepable(overrides: list[str]) -> bool:
    from raglab.secrets import override_secrets

    for o in overrides:
        key = _override_key(o)
        if "=" not in o or "${" in o:
            return False
        if key.lstrip("+~").startswith(("hydra.", "hydra/", "hydra")) and key != "hydra.run.dir":
            return False
    return _set_once(overrides) and not override_secrets(overrides)


def _has_interpolation(node: Any) -> bool:
    if isinstance(node, dict):
        return any(_has_interpolation(k) or _has_interpolation(v) for k, v in node.items())
    if isinstance(node, list):
        return any(_has_interpolation(v) for v in node)
    return isinstance(node, str) and "${" in node


def keepable(overrides: list[str], unresolved: dict[str, Any], hydra: dict[str, Any],
             choices: dict[str, Any]) -> bool:
    """Whether a composition depends on nothing but its overrides and :func:`conf_key`
    (``unresolved``: the task configuration before interpolation; ``hydra``: Hydra's
    section, unresolved)."""
    from raglab.secrets import secret_values

    if not _overrides_keepable(overrides) or _has_interpolation(unresolved):
        return False
    if unresolved.get("plugins") or secret_values(unresolved, unresolved):
        return False
    run_dir = (hydra.get("run") or {}).get("dir")
    if not isinstance(run_dir, str) or "${" in _NOW.sub("", run_dir):
        return False
    job = hydra.get("job") or {}
    callbacks = hydra.get("callbacks") or {}
    return (job.get("chdir") is False and not job.get("env_set")
            and hydra.get("output_subdir") is None and not hydra.get("verbose")
            and hydra.get("mode") in (None, "RUN")
            and choices.get("hydra/job_logging") == "none"
            and choices.get("hydra/hydra_logging") == "none"
            and set(callbacks) <= {"sweep_summary"}
            and all((c or {}).get("_target_") == "raglab.runner.sweep.SweepSummary"
                    for c in callbacks.values()))


def yaml_text(public: Any) -> str:
    """The YAML text ``OmegaConf.to_yaml`` gives for a plain configuration, written by
    PyYAML with OmegaConf's rule for strings (quoted when they read as a bool or a number),
    without importing OmegaConf. :func:`keep` checks that the two agree on the configuration
    it keeps before a kept run relies on it."""
    import yaml

    class Dumper(yaml.Dumper):
        pass

    def as_str(dumper: Any, data: str) -> Any:
        quoted = data in _YAML_BOOLS or _reads_as_number(data)
        return dumper.represent_scalar("tag:yaml.org,2002:str", data,
                                       style="'" if quoted else None)

    Dumper.add_representer(str, as_str)
    return yaml.dump(public, default_flow_style=False, allow_unicode=True, sort_keys=False,
                     Dumper=Dumper)


_YAML_BOOLS = frozenset("y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On "
                        "ON off Off OFF".split())


def _reads_as_number(text: str) -> bool:
    for kind in (int, float):
        try:
            kind(text)
            return True
        except ValueError:
            continue
    return False


def keep(overrides: list[str], config: dict[str, Any], run_dir: str, job: JobInfo,
         public: Any, yaml_text_: str) -> None:
    """Write the entry of a composition :func:`keepable` judged keepable (best effort, as
    :func:`write_kept`)."""
    if public != config:  # redaction or scrubbing changed a value: it holds a secret
        return
    try:
        if yaml_text(public) != yaml_text_:  # PyYAML alone would not write the same text
            return
    except Exception:  # noqa: BLE001 - then it is not kept
        return
    entry = {"format": FORMAT, "shape": shape(overrides), "overrides": overrides,
             "config": config, "run_dir": run_dir,
             "task_overrides": list(job.task_overrides), "choices": dict(job.choices),
             "yaml": yaml_text_}
    write_kept(_entry_path(str(config.get("cache_dir") or DEFAULT_CACHE_DIR), overrides),
               entry)


@dataclass
class Kept:
    """A kept composition, ready to run."""

    config: dict[str, Any]
    run_dir: str
    job_args: dict[str, Any]


def lookup(overrides: list[str]) -> Kept | None:
    """The kept composition of these overrides' shape with their own path values set, or
    None (nothing kept, or it no longer applies)."""
    if not _overrides_keepable(overrides):
        return None
    cache_dir = _cache_dir_of(overrides)
    try:
        entry = read_kept(_entry_path(cache_dir, overrides))
    except RuntimeError:  # ~user of no known home
        return None
    try:
        if entry["format"] != FORMAT or entry["shape"] != shape(overrides) \
                or len(entry["overrides"]) != len(overrides):
            return None
        config = entry["config"]
        run_dir = entry["run_dir"]
        task_overrides = list(entry["task_overrides"])
        same_config = True
        for old, new in zip(entry["overrides"], overrides):
            if old == new:
                continue
            key, value = new.split("=", 1)
            old_value = old.split("=", 1)[1]
            if key == "hydra.run.dir":
                if run_dir != old_value:
                    return None
                run_dir = value
            elif not _set_leaf(config, key, old_value, value):
                return None
            else:
                same_config = False
            if old in task_overrides:
                task_overrides[task_overrides.index(old)] = new
        if config.get("cache_dir") != cache_dir:
            return None
        # the YAML text kept serves the same configuration (another run directory); one
        # with other paths is written by yaml_text
        return Kept(config, run_dir, {"task_overrides": task_overrides,
                                      "choices": dict(entry["choices"]), "kept": True,
                                      "kept_yaml": str(entry["yaml"]) if same_config
                                      else None})
    except (KeyError, TypeError, AttributeError, ValueError):
        return None


def _set_leaf(config: dict[str, Any], key: str, old: str, new: str) -> bool:
    """Set the value at ``key`` (dotted) to ``new`` where the kept composition holds ``old``
    there; False when it does not (then the entry does not apply)."""
    *parents, leaf = key.split(".")
    node: Any = config
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict) or node.get(leaf) != old:
        return False
    node[leaf] = new
    return True
def run_dir_of(pattern: str, now: datetime | None = None) -> str:
    """The run directory of a pattern whose only interpolation is ``${now:FORMAT}`` (as
    Hydra's ``now`` resolver formats it)."""
    now = now or datetime.now()
    return _NOW.sub(lambda m: now.strftime(m.group(1)), pattern)
