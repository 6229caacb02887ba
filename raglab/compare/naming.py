"""Naming the jobs of a sweep by the parameters it swept (``k=3,chunker.size=256``), from
its ``multirun.yaml`` or, when it has none, from the keys whose values differ; a job of a
system other than the reference pipeline says which (``langchain k=3``, ``replay:out k=3``),
as its run name does (raglab.runner.naming)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from raglab.secrets import REDACTED

_SWEEP_FUNCS = ("range(", "choice(", "interval(", "glob(", "tag(", "sort(", "shuffle(")
_IGNORED = ("hydra", "run_name")
#: the longest value a name shows (cut in the middle, with an ellipsis)
MAX_VALUE = 24
#: the system kind a name leaves implicit (the shipped pipeline)
IMPLICIT_KIND = "reference"


def middle(text: str, width: int = MAX_VALUE) -> str:
    """``text`` at most ``width`` characters, cut in the middle (``outputs-20…-candidate``):
    both its start and its end stay, so two values differing at either end stay apart."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    tail = (width - 1) // 2
    return text[:width - 1 - tail] + "…" + (text[-tail:] if tail else "")


def system_kind(public: Mapping[str, Any]) -> tuple[str, str, bool]:
    """``(shown, full, shortened)`` of the system a run measures: its kind (``langchain``,
    ``http``, ...; the reference pipeline stays implicit: ``""``), a replay with the stem of
    the file it replays (``replay:outputs-v2``, cut in the middle)."""
    system = public.get("system")
    kind = system.get("name") if isinstance(system, Mapping) else None
    if not isinstance(kind, str) or kind == IMPLICIT_KIND:
        return "", "", False
    if kind == "replay" and isinstance(system, Mapping):
        path = system.get("path")
        if isinstance(path, str) and path and path != REDACTED:
            stem = PurePath(path).stem or path
            return f"replay:{middle(stem)}", f"replay:{path}", stem != path
    return kind, kind, False


def _read_yaml(path: Path) -> dict:
    from raglab.data.yaml_io import load_yaml_file
    from raglab.errors import UserError

    try:
        data = load_yaml_file(path)
    except UserError:
        return {}
    return data if isinstance(data, dict) else {}


def _is_sweep_value(value: str) -> bool:
    v = value.strip()
    if v.startswith(_SWEEP_FUNCS):
        return True
    depth = 0
    for ch in v:
        depth += ch in "[{("
        depth -= ch in "]})"
        if ch == "," and depth == 0:
            return True
    return False


def swept_keys(multirun: dict) -> list[str]:
    """The swept parameters of a multirun.yaml: sweep overrides, then sweeper params."""
    hydra = multirun.get("hydra") or {}
    keys: list[str] = []
    for o in ((hydra.get("overrides") or {}).get("task") or []):
        key, sep, value = str(o).partition("=")
        if sep and _is_sweep_value(value):
            keys.append(key.lstrip("+~"))
    params = (hydra.get("sweeper") or {}).get("params") or {}
    keys += [str(k).lstrip("+~") for k in params if str(k).lstrip("+~") not in keys]
    return keys


def _lookup(config: dict, key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if isinstance(node, dict):  # a config group: its choice
        return node.get("name")
    return node


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def _flat(config: dict, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in config.items():
        key = f"{prefix}{k}"
        if not prefix and k in _IGNORED:
            continue
        if isinstance(v, dict):
            out.update(_flat(v, key + "."))
        else:
            out[key] = _text(v)
    return out


def differing_keys(configs: list[dict]) -> list[str]:
    flats = [_flat(c) for c in configs]
    keys = list(dict.fromkeys(k for f in flats for k in f))
    return [k for k in keys if len({f.get(k) for f in flats}) > 1]


def name_of(params: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items()) or "defaults"


def job_label(run_dir: Path) -> str | None:
    """A Hydra multirun job's name from the sweep's multirun.yaml (None when unknown)."""
    keys = swept_keys(_read_yaml(run_dir.parent / "multirun.yaml"))
    config = _read_yaml(run_dir / "config.yaml")
    if not keys or not config:
        return None
    kind = system_kind(config)[0]
    return (f"{kind} " if kind else "") + name_of({k: _text(_lookup(config, k)) for k in keys})
