"""conf/monitor/*.yaml compose with ``+monitor=NAME`` and validate against MonitorCfg."""

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from raglab.commands.common import conf_dir
from raglab.commands.compose import register_schema_defaults
from raglab.config import parse_run_config
from raglab.monitor.traffic import MonitorCfg, window_seconds


@pytest.mark.parametrize("name", sorted(p.stem for p in (conf_dir() / "monitor").glob("*.yaml")))
def test_monitor_configs_compose(name):
    register_schema_defaults()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"+monitor={name}"])
    data = OmegaConf.to_container(cfg, resolve=True)
    mon = MonitorCfg.model_validate(data.pop("monitor"))
    assert parse_run_config(data) is not None
    assert window_seconds(mon.window) > 0 and 0 < mon.sample_rate <= 1


def test_window_spec():
    assert window_seconds("1h") == 3600 and window_seconds("2d") == 172800
    for bad in ("1x", "h", "0h", ""):
        with pytest.raises(ValueError):
            window_seconds(bad)
