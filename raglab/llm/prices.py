"""Prices belong to models: one table keyed by model name (``raglab/llm/prices.yaml``, the
Anthropic and OpenAI models raglab's configs name), extended or overridden per model by the
run's ``llm.prices`` and by a component's own ``prices`` (for its own model). A model with
no price has an unknown cost (``n/a``): never another model's price."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PRICE_KEYS = ("input", "output", "cache_write", "cache_read")


@functools.cache
def shipped() -> dict[str, Any]:
    """The shipped table: ``{"checked": DATE, "models": {MODEL: {KEY: USD per 1M}}}``."""
    import yaml

    data = yaml.safe_load((Path(__file__).with_name("prices.yaml")).read_text("utf-8"))
    return {"checked": str(data["checked"]),
            "models": {str(m): {k: float(v) for k, v in p.items()}
                       for m, p in data["models"].items()}}


def price_of(model: str | None, own: Mapping[str, float] | None = None,
             table: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, float] | None:
    """The prices of ``model``: the component's ``own`` when it has some, else the run's
    ``table`` (``llm.prices``) entry, else the shipped one; None when none is known."""
    if not model:
        return None
    for found in (own, (table or {}).get(model), shipped()["models"].get(model)):
        if found:
            return dict(found)
    return None


def model_prices_of(cfg: Any, run_cfg: Any) -> dict[str, dict[str, float]]:
    """``{model: prices}`` of one component's model (its own ``prices``, else the run's
    ``llm.prices``, else the shipped table), or ``{}`` when none is known."""
    table = getattr(getattr(run_cfg, "llm", None), "prices", None)
    found = price_of(cfg.model, getattr(cfg, "prices", None), table)
    return {cfg.model: found} if found else {}


def complete(prices: Mapping[str, float]) -> dict[str, float]:
    """A free model (input price 0) reads and writes its cache for free too: an entry of
    ``{input: 0, output: 0}`` prices every token a local server reports."""
    out = dict(prices)
    if out.get("input") == 0:
        for key in ("cache_write", "cache_read"):
            out.setdefault(key, 0.0)
    return out
