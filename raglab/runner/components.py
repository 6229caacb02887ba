"""Building a run's components from its config, through the registry only: every factory
gets its config section and the same :class:`~raglab.components.BuildContext`, and what a
component needs (checks, a model, prompts) is asked of its class, never of its name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raglab import registry
from raglab.components import BuildContext
from raglab.config import RunCfg
from raglab.errors import ConfigError
from raglab.llm.backends import backend_class
from raglab.llm.client import LLMClient


def _cls(cfg: RunCfg, group: str) -> Any:
    return registry.entry(group, getattr(cfg, group).name).factory


def preflight(cfg: RunCfg) -> dict[str, str]:
    """Every component's checks before any work; returns the grader's prompt texts."""
    for group in ("grader", "system"):
        _cls(cfg, group).preflight(cfg)
    return grader_prompts(cfg)


def grader_prompts(cfg: RunCfg) -> dict[str, str]:
    return dict(_cls(cfg, "grader").load_prompts(cfg.grader))


def llm_owner(cfg: RunCfg) -> tuple[str, Any] | None:
    """The component whose settings make the run's one LLM client: the grader when it
    calls a model, else the system's model-calling component (if any)."""
    if grader_uses_llm(cfg):
        return "grader", cfg.grader
    return _cls(cfg, "system").llm_owner(cfg)


def llm_client(cfg: RunCfg, cache: Any) -> LLMClient | None:
    """The run's LLM client (made on the running event loop), or None when no component
    calls a model."""
    owner = llm_owner(cfg)
    if owner is None:
        return None
    for used in (owner, _cls(cfg, "system").llm_owner(cfg)):
        if used is not None:  # the SDKs are slow to import: here, before any case is timed
            name = getattr(registry.entry(used[0], used[1].name).factory, "llm_backend", None)
            if name:
                backend_class(name).preload()
    group, section = owner
    settings = registry.entry(group, section.name).factory.llm_settings(section, cfg)
    settings["prices"] = model_prices(cfg)  # every model user's prices, one client
    for model in unpriced_models(cfg):  # said once per run
        import sys

        print(f"raglab: note: no price known for model {model!r}: its cost is n/a (give "
              f"it one in llm.prices, USD per million tokens; 0 for a local model)",
              file=sys.stderr, flush=True)
    return LLMClient(**settings, cache=cache)


def grader_uses_llm(cfg: RunCfg) -> bool:
    return bool(_cls(cfg, "grader").uses_llm)


def tracks(cfg: RunCfg) -> bool:
    """Whether the run's tracker logs it to a tracking store."""
    return bool(_cls(cfg, "tracking").tracks)


def system_model_section(cfg: RunCfg) -> Any:
    """The config of the system's model-calling component (the Claude generator), or None."""
    found = _cls(cfg, "system").llm_owner(cfg)
    return found[1] if found is not None else None


def system_identity_of(cfg: RunCfg) -> dict[str, str]:
    """What identifies the system beyond its config (its class's ``identity``)."""
    return dict(_cls(cfg, "system").identity(cfg))


def grader_model(cfg: RunCfg) -> str | None:
    """The model the grader calls (its class's ``model_id``), or None (heuristic, none)."""
    cls = _cls(cfg, "grader")
    return cls.model_id(cfg.grader) if cls.grades else None


def system_model(cfg: RunCfg) -> str | None:
    """The model the system's model-calling component calls (``model_id``), or None."""
    found = _cls(cfg, "system").llm_owner(cfg)
    if found is None:
        return None
    group, section = found
    return registry.entry(group, section.name).factory.model_id(section)


def _model_users(cfg: RunCfg) -> list[Any]:
    return [s for s in (system_model_section(cfg),
                        cfg.grader if grader_uses_llm(cfg) else None) if s is not None]


def model_prices(cfg: RunCfg) -> dict[str, dict[str, float]]:
    """``{model: prices}`` of every model the run calls (the grader's and the generator's):
    a component's own ``prices``, else the run's ``llm.prices``, else the shipped table
    (:func:`raglab.llm.prices.price_of`). A model priced nowhere is left out (its cost is
    unknown). One model given two different ``prices`` of its own is a config error."""
    from raglab.llm.prices import price_of

    out: dict[str, dict[str, float]] = {}
    own: dict[str, dict[str, float]] = {}
    for section in _model_users(cfg):
        model = section.model
        mine = dict(getattr(section, "prices", None) or {})
        if mine and model in own and own[model] != mine:
            raise ConfigError(f"config generator.prices and grader.prices differ for the "
                              f"same model {model!r} (set it once, in llm.prices)")
        if mine:
            own[model] = mine
        found = price_of(model, mine or own.get(model), cfg.llm.prices)
        if found is not None:
            out[model] = found
    return out


def unpriced_models(cfg: RunCfg) -> list[str]:
    """The models the run calls that no price table prices (their cost is n/a)."""
    priced = model_prices(cfg)
    return sorted({s.model for s in _model_users(cfg) if s.model not in priced})


def build_context(cfg: RunCfg, dataset: Any = None, cache: Any = None, work: Any = None,
                  llm: Any = None, prompts: dict[str, str] | None = None) -> BuildContext:
    return BuildContext(run=cfg, dataset=dataset, cache=cache, work=work, llm=llm,
                        prompts=dict(prompts or {}))


def build_system(cfg: RunCfg, dataset: Any, cache: Any, work: Any, llm: Any = None) -> Any:
    return registry.build("system", cfg.system, build_context(cfg, dataset, cache, work, llm))


def build_grader(cfg: RunCfg, prompts: dict[str, str], llm: Any) -> Any:
    """The grader, or None for a choice that grades nothing (``grader=none``)."""
    if not _cls(cfg, "grader").grades:
        return None
    return registry.build("grader", cfg.grader, build_context(cfg, llm=llm, prompts=prompts))


class _RunFiles:
    """What a tracker reads from and hands to the rest of raglab (run.json, the report)."""

    def tracked_identity(self, run_dir: Path) -> dict[str, Any] | None:
        from raglab.runner.identity import read_identity

        return read_identity(run_dir).get("mlflow")

    def remember_identity(self, run_dir: Path, identity: dict[str, Any]) -> None:
        from raglab.runner.identity import update_identity

        update_identity(run_dir, mlflow=identity)

    def report_files(self, run_dir: Path) -> list[Path]:
        from raglab.report.run_report import report_files

        return report_files(run_dir)

    def description(self, run_name: str, metrics: dict[str, Any], resolved: Any,
                    diffs: list, link: Any) -> str:
        from raglab.report.summary import run_description

        return run_description(run_name, metrics, resolved, diffs, link)


def build_tracker(cfg: RunCfg, resolved: dict[str, Any], run_name: str,
                  sweep_dir: str | None, sweep_name: str = "") -> Any:
    ctx = BuildContext(run=cfg, resolved=resolved, run_name=run_name, sweep_dir=sweep_dir,
                       sweep_name=sweep_name, run_files=_RunFiles())
    return registry.build("tracking", cfg.tracking, ctx)
