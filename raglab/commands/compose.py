"""Composing configs without an output directory (Hydra compose API), with one-line errors."""

from __future__ import annotations

from typing import Any

from raglab.commands.common import conf_dir


def compose(overrides: list[str]) -> Any:
    """The composed config; a ConfigError (one line) for a bad override."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from raglab.errors import ConfigError

    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
            return hydra_compose(config_name="config", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(" ".join(str(e).split())) from None
