"""The system registry: ``system.name`` -> a built adapter."""

from __future__ import annotations

from typing import Any

from raglab.config import RunCfg


def build_system(cfg: RunCfg, dataset, cache, work, llm: Any = None):
    name = cfg.system.name
    if name == "reference":
        from raglab.systems.reference import ReferenceSystem

        return ReferenceSystem(cfg, dataset, cache, work, llm)
    if name == "replay":
        from raglab.systems.replay import ReplaySystem

        return ReplaySystem(cfg.system.path)
    if name == "http":
        from raglab.systems.http import HttpSystem

        return HttpSystem(cfg.system)
    from raglab.systems.python import load_python_system

    return load_python_system(cfg.system.target, cfg.system.options)
