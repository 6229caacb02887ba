"""One hop from a config choice to its code, the same for every group.

``conf/GROUP/NAME.yaml`` says ``name: NAME``; the class (or factory) that implements it is
registered under ``(GROUP, NAME)`` together with its typed config schema, in the module
that implements it::

    class FixedChunkerCfg(Section):
        name: Literal["fixed"]
        size: int

    @register("chunker", "fixed", config=FixedChunkerCfg)
    class FixedChunker:
        def __init__(self, cfg: FixedChunkerCfg): ...

``GROUPS`` lists where each group's components live; a package stands for every module in
it (so adding an embedder is one module in ``raglab/systems/index/`` and one YAML file).
They are imported on the first lookup of their group, never at ``import raglab``; looking up
one choice imports only the module named like it, when there is one (``entries`` imports
the whole group). Modules
outside raglab register the same way and are imported through the run's ``plugins`` list.
An unknown name is a :class:`~raglab.errors.ConfigError` listing the valid ones: there is
no default choice.

Optional hooks a registered class may define (looked up with :func:`hook`):
``preflight(run_cfg)`` (checks before any work: keys, extras, files), and group-specific
ones documented with each group's base (for example ``load_prompts`` of graders).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from raglab.errors import ConfigError

#: group -> the modules (or packages: every module in them) that register its choices
GROUPS: dict[str, tuple[str, ...]] = {
    "system": ("raglab.systems.reference", "raglab.systems.replay", "raglab.systems.http",
               "raglab.systems.python"),
    "chunker": ("raglab.systems.chunkers",),
    "embedder": ("raglab.systems.index",),
    "reranker": ("raglab.systems.rerankers",),
    "generator": ("raglab.systems.generators",),
    "grader": ("raglab.graders.heuristic", "raglab.graders.claude", "raglab.graders.none"),
    "tracking": ("raglab.runner.tracker",),
}


@dataclass(frozen=True)
class Entry:
    group: str
    name: str
    factory: Callable[..., Any]
    config: type  # the pydantic schema of this choice (its ``name`` is a Literal)


_ENTRIES: dict[str, dict[str, Entry]] = {g: {} for g in GROUPS}
_LOADED: set[str] = set()
_generation = 0  # bumped on every registration (config schemas are rebuilt after one)


def register(group: str, name: str, *, config: type) -> Callable[[Any], Any]:
    """Class (or factory) decorator: ``config`` is the typed schema of this choice."""
    if group not in GROUPS:
        raise ValueError(f"unknown component group {group!r} (groups: {', '.join(GROUPS)})")
    field = getattr(config, "model_fields", {}).get("name")
    if field is None or getattr(field.annotation, "__args__", None) != (name,):
        raise ValueError(f"{config.__name__} must declare name: Literal[{name!r}]")

    def deco(factory: Any) -> Any:
        global _generation
        old = _ENTRIES[group].get(name)
        if old is not None and (old.factory.__module__, old.factory.__qualname__) != (
                factory.__module__, factory.__qualname__):
            raise ValueError(f"{group} {name!r} is already registered by "
                             f"{old.factory.__module__}.{old.factory.__qualname__}")
        _ENTRIES[group][name] = Entry(group, name, factory, config)
        _generation += 1
        return factory

    return deco


def _import_group(group: str) -> None:
    if group in _LOADED:
        return
    for modname in GROUPS[group]:
        module = importlib.import_module(modname)
        if hasattr(module, "__path__"):  # a package: every module in it
            for info in pkgutil.iter_modules(module.__path__):
                if not info.name.startswith("_"):
                    importlib.import_module(f"{modname}.{info.name}")
    _LOADED.add(group)


def import_plugins(modules: Iterable[str]) -> None:
    """Import the user's modules that register components (the run's ``plugins``). A plugin
    that registers a name raglab's own components already use is a ConfigError, whether or
    not the built-in module was imported yet."""
    for modname in modules:
        before = {g: set(e) for g, e in _ENTRIES.items()}
        try:
            importlib.import_module(modname)
            for group, names in _ENTRIES.items():
                for name in sorted(set(names) - before[group]):
                    if group in _LOADED:
                        continue
                    try:
                        _import_named(group, name)  # raises if a built-in has the name
                    except ValueError:
                        raise ConfigError(f"config plugins: {modname!r} registers {group} "
                                          f"{name!r}, a name raglab's own components use; "
                                          "choose another name") from None
        except ImportError as e:
            raise ConfigError(f"config plugins: cannot import {modname!r}: {e}") from None
        except ValueError as e:
            if "already registered" not in str(e):
                raise
            raise ConfigError(f"config plugins: {modname!r}: {e}") from None


def entries(group: str) -> dict[str, Entry]:
    """Every registered choice of a group, by name."""
    if group not in GROUPS:
        raise ValueError(f"unknown component group {group!r}")
    _import_group(group)
    return dict(_ENTRIES[group])


def choices(group: str) -> list[str]:
    return sorted(entries(group))


def _import_named(group: str, name: str) -> None:
    """Import only the module that is named like the choice (``raglab.systems.replay`` for
    ``system=replay``, ``raglab.systems.index.bm25`` for ``embedder=bm25``), when there is
    one: looking up one choice need not import every other (and their dependencies)."""
    import importlib.util

    for modname in GROUPS[group]:
        spec = importlib.util.find_spec(modname)
        if spec is None:
            continue
        if modname.rsplit(".", 1)[-1] == name:
            importlib.import_module(modname)
        elif spec.submodule_search_locations:  # a package: its module named like the choice
            try:
                found = importlib.util.find_spec(f"{modname}.{name}")
            except ModuleNotFoundError:
                found = None
            if found is not None:
                importlib.import_module(f"{modname}.{name}")


def entry(group: str, name: str) -> Entry:
    if group not in GROUPS:
        raise ValueError(f"unknown component group {group!r}")
    if name not in _ENTRIES[group] and group not in _LOADED and isinstance(name, str) \
            and name.isidentifier():
        _import_named(group, name)
    found = _ENTRIES[group].get(name) or entries(group).get(name)
    if found is None:
        valid = ", ".join(repr(n) for n in choices(group))
        raise ConfigError(f"config {group}: unknown choice {name!r} (valid: {valid})")
    return found


def build(group: str, cfg: Any, *args: Any, **kwargs: Any) -> Any:
    """The component of ``cfg.name`` in ``group``, made from its config section."""
    return entry(group, cfg.name).factory(cfg, *args, **kwargs)


def hook(group: str, name: str, hook_name: str, default: Any = None) -> Any:
    """A registered choice's optional hook (a class attribute or method), or ``default``."""
    return getattr(entry(group, name).factory, hook_name, default)


def generation() -> int:
    """Changes whenever a component is registered (for caches of derived schemas)."""
    return _generation
