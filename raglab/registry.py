"""One hop from a config choice to its code, the same for every group.

``conf/GROUP/NAME.yaml`` says ``name: NAME``; the class that implements it subclasses its
group's protocol (:mod:`raglab.components`) and is registered under ``(GROUP, NAME)``
together with its typed config schema, in the module that implements it::

    class FixedChunkerCfg(Section):
        name: Literal["fixed"]
        size: int

    @register("chunker", "fixed", config=FixedChunkerCfg)
    class FixedChunker(Chunker):
        def chunk(self, doc_id, text): ...

Every factory is called the same way, ``factory(section_cfg, ctx)`` with the run's
:class:`~raglab.components.BuildContext` (:func:`build`).

Discovery, one mechanism for every group: a component is a module that registers it.
raglab's own modules are found by their ``@register("GROUP", "NAME", ...)`` lines in the
packages of :data:`BUILTIN_PACKAGES` (read, not imported), so looking up one choice
imports only the module that registers it, never at ``import raglab``. Modules outside
raglab register the same way and are imported through the entry points of the group
``raglab.plugins`` (each names a module) and the run's ``plugins`` list. An unknown name
is a :class:`~raglab.errors.ConfigError` listing the valid ones: there is no default
choice; a plugin that registers a name raglab's own components use is one too.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raglab.components import CONTRACTS, GROUPS, NO_CONTEXT, BuildContext
from raglab.errors import ConfigError

#: the packages whose modules register raglab's own components
BUILTIN_PACKAGES = ("raglab.systems", "raglab.graders", "raglab.tracking")
#: the entry-point group of third-party component modules
ENTRY_POINT_GROUP = "raglab.plugins"
_DECLARED = re.compile(r'^@register\(\s*"(\w+)"\s*,\s*"([\w.-]+)"', re.MULTILINE)


@dataclass(frozen=True)
class Entry:
    group: str
    name: str
    factory: Any  # the registered class: ``factory(section_cfg, ctx)``
    config: type  # the pydantic schema of this choice (its ``name`` is a Literal)


_ENTRIES: dict[str, dict[str, Entry]] = {g: {} for g in GROUPS}
_LOADED: set[str] = set()  # groups whose every built-in and plugin module is imported
_BUILTINS: dict[tuple[str, str], str] | None = None
_ENTRY_POINTS_LOADED = False
_generation = 0  # bumped on every registration (config schemas are rebuilt after one)


def builtins() -> dict[tuple[str, str], str]:
    """``{(group, name): module}`` of raglab's own components, from their ``@register``
    lines (the source is read once, nothing is imported)."""
    global _BUILTINS
    if _BUILTINS is None:
        found: dict[tuple[str, str], str] = {}
        root = Path(__file__).resolve().parent.parent
        for package in BUILTIN_PACKAGES:
            for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
                text = path.read_text(encoding="utf-8")
                if "@register(" not in text:
                    continue
                rel = path.relative_to(root).with_suffix("")
                module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
                for group, name in _DECLARED.findall(text):
                    found[(group, name)] = module
        _BUILTINS = found
    return _BUILTINS


def register(group: str, name: str, *, config: type) -> Callable[[Any], Any]:
    """Class decorator: ``config`` is the typed schema of this choice; the class subclasses
    the group's protocol (:data:`raglab.components.CONTRACTS`)."""
    if group not in GROUPS:
        raise ValueError(f"unknown component group {group!r} (groups: {', '.join(GROUPS)})")
    field = getattr(config, "model_fields", {}).get("name")
    if field is None or getattr(field.annotation, "__args__", None) != (name,):
        raise ValueError(f"{config.__name__} must declare name: Literal[{name!r}]")

    def deco(factory: Any) -> Any:
        global _generation
        where = f"{factory.__module__}.{factory.__qualname__}"
        owner = builtins().get((group, name))
        if owner is not None and owner != factory.__module__:
            raise ValueError(f"{group} {name!r} is already registered by {owner} "
                             f"(raglab's own), not {where}")
        old = _ENTRIES[group].get(name)
        if old is not None and (old.factory.__module__, old.factory.__qualname__) != (
                factory.__module__, factory.__qualname__):
            raise ValueError(f"{group} {name!r} is already registered by "
                             f"{old.factory.__module__}.{old.factory.__qualname__}")
        contract = CONTRACTS[group]
        if not (isinstance(factory, type) and contract in factory.__mro__):
            raise ValueError(f"{where} must be a class subclassing "
                             f"raglab.components.{contract.__name__}")
        _ENTRIES[group][name] = Entry(group, name, factory, config)
        _generation += 1
        return factory

    return deco


def _import_plugin(modname: str, where: str) -> None:
    """Import a module that registers components (``where``: how it was named)."""
    try:
        importlib.import_module(modname)
    except ImportError as e:
        raise ConfigError(f"{where}: cannot import {modname!r}: {e}") from None
    except ValueError as e:
        if "already registered" not in str(e):
            raise
        m = re.match(r"(\w+) ('[^']*') is already registered by \S+ \(raglab's own\)", str(e))
        if m:
            raise ConfigError(f"{where}: {modname!r} registers {m.group(1)} {m.group(2)}, "
                              "a name raglab's own components use; choose another name"
                              ) from None
        raise ConfigError(f"{where}: {modname!r}: {e}") from None


def import_plugins(modules: Iterable[str]) -> None:
    """Import the user's modules that register components (the run's ``plugins``)."""
    for modname in modules:
        _import_plugin(modname, "config plugins")


def _entry_points() -> None:
    """Import the modules named by the entry points of :data:`ENTRY_POINT_GROUP` (once)."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _import_plugin(ep.value.split(":")[0].strip(),
                       f"entry point {ENTRY_POINT_GROUP} {ep.name!r}")


def entries(group: str) -> dict[str, Entry]:
    """Every registered choice of a group, by name."""
    if group not in GROUPS:
        raise ValueError(f"unknown component group {group!r}")
    if group not in _LOADED:
        for (g, _), module in sorted(builtins().items()):
            if g == group:
                importlib.import_module(module)
        _entry_points()
        _LOADED.add(group)
    return dict(_ENTRIES[group])


def choices(group: str) -> list[str]:
    return sorted(entries(group))


def entry(group: str, name: str) -> Entry:
    if group not in GROUPS:
        raise ValueError(f"unknown component group {group!r}")
    found = _ENTRIES[group].get(name)
    if found is None and isinstance(name, str):
        module = builtins().get((group, name))
        if module is not None:  # only the module that registers this choice
            importlib.import_module(module)
        found = _ENTRIES[group].get(name) or entries(group).get(name)
    if found is None:
        valid = ", ".join(repr(n) for n in choices(group))
        raise ConfigError(f"config {group}: unknown choice {name!r} (valid: {valid})")
    return found


def build(group: str, cfg: Any, ctx: BuildContext = NO_CONTEXT) -> Any:
    """The component of ``cfg.name`` in ``group``, made from its config section and the
    build context: ``factory(cfg, ctx)``, the same for every group."""
    return entry(group, cfg.name).factory(cfg, ctx)


def generation() -> int:
    """Changes whenever a component is registered (for caches of derived schemas)."""
    return _generation
