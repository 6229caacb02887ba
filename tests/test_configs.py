"""Every shipped config composes and validates against its typed schema."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from raglab.commands.common import conf_dir
from raglab.commands.compose import register_schema_defaults
from raglab.config import parse_run_config
from raglab.errors import ConfigError

REQUIRED = {"system/replay": ["system.path=x.jsonl"], "system/http": ["system.url=http://h/"],
            "system/python": ["system._target_=pkg.mod.make"],
            "system/langchain": ["system.factory=pkg.mod:make"],
            "system/llamaindex": ["system.factory=pkg.mod:make"]}


# groups read by other commands, not composed into a run (each has its own schema test;
# monitor and drafter are composed by raglab monitor and raglab cases draft with
# +monitor=NAME, +drafter=NAME)
NOT_RUN_GROUPS = {"compare", "drafter", "gates", "monitor"}


def _options():
    root = conf_dir()
    for group in sorted(p for p in root.iterdir() if p.is_dir() and p.name not in NOT_RUN_GROUPS):
        for f in sorted(group.glob("*.yaml")):
            yield group.name, f.stem


def _compose(overrides):
    register_schema_defaults()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    return parse_run_config(OmegaConf.to_container(cfg, resolve=True))


@pytest.mark.parametrize("group,option", list(_options()))
def test_every_option_composes(group, option):
    ov = [f"{group}={option}", *REQUIRED.get(f"{group}/{option}", [])]
    cfg = _compose(ov)
    assert cfg is not None


def test_demo_config_names_its_grader_and_models_explicitly():
    cfg = _compose([])
    assert cfg.grader.name == "heuristic"
    claude = _compose(["grader=claude", "generator=anthropic"])
    assert claude.grader.model and claude.generator.model


def test_typed_errors():
    with pytest.raises(ConfigError, match="k \\(9\\) must not exceed candidate_depth \\(5\\)"):
        _compose(["k=9", "candidate_depth=5"])
    with pytest.raises(ConfigError, match="overlap"):
        _compose(["chunker=fixed", "chunker.size=10", "chunker.overlap=10"])


def test_configs_ship_inside_the_package_build():
    import tomllib

    py = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    wheel = py["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["force-include"]["conf"] == "raglab/conf"


def test_compare_config_validates():
    import yaml

    from raglab.compare.config import CompareCfg

    data = yaml.safe_load((conf_dir() / "compare" / "default.yaml").read_text()) or {}
    assert isinstance(data, dict)  # the shipped file holds no setting the schema's default
    assert CompareCfg.model_validate(data).adjust == "holm"


def test_shipped_defaults_equal_a_fresh_composition_and_are_composed_once(monkeypatch):
    from raglab.commands import compose

    monkeypatch.setattr(compose, "_DEFAULTS", None)
    fresh = compose.shipped_defaults()
    assert fresh == compose.compose_config([])

    def no_compose(overrides):
        raise AssertionError("composed again")

    monkeypatch.setattr(compose, "compose_config", no_compose)
    assert compose.shipped_defaults() == fresh  # once per process
