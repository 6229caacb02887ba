"""Building a run's components from its config, through the registry only (no name checks
here: each component's own hooks say what it needs)."""

from __future__ import annotations

from typing import Any

from raglab import registry
from raglab.config import RunCfg
from raglab.errors import ConfigError
from raglab.llm.client import LLMClient


def preflight(cfg: RunCfg) -> dict[str, str]:
    """Every component's checks before any work; returns the grader's prompt texts."""
    for group in ("grader", "system"):
        check = registry.hook(group, getattr(cfg, group).name, "preflight")
        if check is not None:
            check(cfg)
    return grader_prompts(cfg)


def grader_prompts(cfg: RunCfg) -> dict[str, str]:
    load = registry.hook("grader", cfg.grader.name, "load_prompts")
    return dict(load(cfg.grader)) if load is not None else {}


def llm_owner(cfg: RunCfg) -> tuple[str, Any] | None:
    """The component whose settings make the run's one LLM client: the grader when it
    calls a model, else the system's model-calling component (if any)."""
    if registry.hook("grader", cfg.grader.name, "uses_llm", False):
        return "grader", cfg.grader
    owner = registry.hook("system", cfg.system.name, "llm_owner")
    return owner(cfg) if owner is not None else None


def llm_client(cfg: RunCfg, cache: Any) -> LLMClient | None:
    """The run's LLM client (made on the running event loop), or None when no component
    calls a model."""
    owner = llm_owner(cfg)
    if owner is None:
        return None
    import anthropic  # noqa: F401  (a slow import: done here, before any case is timed)

    group, section = owner
    settings = registry.hook(group, section.name, "llm_settings")(section, cfg)
    settings["prices"] = model_prices(cfg)  # every model user's own prices, one client
    return LLMClient(**settings, cache=cache)


def grader_uses_llm(cfg: RunCfg) -> bool:
    return bool(registry.hook("grader", cfg.grader.name, "uses_llm", False))


def system_model_section(cfg: RunCfg) -> Any:
    """The config of the system's model-calling component (the Claude generator), or None."""
    owner = registry.hook("system", cfg.system.name, "llm_owner")
    found = owner(cfg) if owner is not None else None
    return found[1] if found is not None else None


def model_prices(cfg: RunCfg) -> dict[str, dict[str, float]]:
    """``{model: prices}`` from the ``prices`` of every component that calls a model (the
    grader's and the generator's own). One model priced two ways is a config error."""
    out: dict[str, dict[str, float]] = {}
    sections = [system_model_section(cfg), cfg.grader if grader_uses_llm(cfg) else None]
    for section in sections:
        prices = getattr(section, "prices", None)
        if section is None or not prices:
            continue
        model = section.model
        if model in out and out[model] != dict(prices):
            raise ConfigError(f"config generator.prices and grader.prices differ for the "
                              f"same model {model!r}")
        out[model] = dict(prices)
    return out


def build_system(cfg: RunCfg, dataset: Any, cache: Any, work: Any, llm: Any = None) -> Any:
    return registry.entry("system", cfg.system.name).factory(cfg, dataset, cache, work, llm)


def build_grader(cfg: RunCfg, prompts: dict[str, str], llm: Any) -> Any:
    """The grader, or None for ``grader=none``."""
    return registry.build("grader", cfg.grader, prompts, llm)


def build_tracker(cfg: RunCfg, resolved: dict[str, Any], run_name: str,
                  sweep_dir: str | None) -> Any:
    return registry.entry("tracking", cfg.tracking.name).factory(cfg, resolved, run_name,
                                                                 sweep_dir)
