"""A single run's composition kept in cache_dir: the same command shape runs again without
Hydra and gives what Hydra's path gives; anything the composition could depend on beyond
its overrides (an interpolation, a secret, a changed config file) composes again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from raglab.commands import composed
from raglab.commands.composed import JobInfo
from tests.conftest import REPO, TINY_CASES, write_jsonl

WRAPPER = ("import atexit, sys\n"
           "atexit.register(lambda: print('HYDRA' if {'hydra', 'omegaconf'} & set(sys.modules)"
           " else 'NO-HYDRA', file=sys.stderr))\n"
           "sys.argv = ['raglab', *sys.argv[1:]]\n"
           "import raglab.cli\n"
           "raglab.cli.main()\n")


def _run(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-c", WRAPPER, "run", *overrides], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)


def _outputs(path: Path) -> Path:
    rows = [{"case_id": c["id"], "candidates": [{"doc_id": "kb/a"}, {"doc_id": "kb/b"}],
             "context": [{"doc_id": "kb/a"}], "answer": "Within 5 business days.",
             "latency_ms": {"total": 3.0}} for c in TINY_CASES]
    return write_jsonl(path, rows)


def _without_timing(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k not in ("work",)}


def test_the_same_shape_runs_without_hydra_and_equals_hydras_run(tmp_path, tiny):
    corpus, cases = tiny
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    out_a, out_b = _outputs(tmp_path / "a" / "out.jsonl"), _outputs(tmp_path / "b" / "out.jsonl")
    cache = tmp_path / "cache"

    def overrides(out: Path, run_dir: str) -> list[str]:
        return ["system=replay", f"system.path={out}", f"dataset.corpus={corpus}",
                f"dataset.cases={cases}", "dataset.labels=null", "grader=heuristic",
                "tracking=none", f"hydra.run.dir={tmp_path / run_dir}", f"cache_dir={cache}",
                "progress=off", "k=3"]

    first = _run(tmp_path, *overrides(out_a, "r1"))
    assert first.returncode == 0, first.stderr
    assert first.stderr.strip().endswith("HYDRA")
    assert len(list((cache / "compose").glob("*.json"))) == 1

    kept = _run(tmp_path, *overrides(out_b, "r2"))  # other paths: the same shape
    assert kept.returncode == 0, kept.stderr
    assert kept.stderr.strip().endswith("NO-HYDRA")

    shutil.rmtree(cache / "compose")  # the same command through Hydra again
    hydra = _run(tmp_path, *overrides(out_b, "r3"))
    assert hydra.returncode == 0 and hydra.stderr.strip().endswith("HYDRA")

    r2, r3 = tmp_path / "r2", tmp_path / "r3"
    assert (r2 / "config.yaml").read_bytes() == (r3 / "config.yaml").read_bytes()
    assert str(out_b) in (r2 / "config.yaml").read_text()
    m2, m3 = (json.loads((d / "metrics.json").read_text()) for d in (r2, r3))
    assert _without_timing(m2) == _without_timing(m3)
    # the summary (the run's name included) is the same, bar the run directory
    assert kept.stdout.replace(str(r2), "R") == hydra.stdout.replace(str(r3), "R")

    # a run's report, written from its configuration in memory, equals one from config.yaml
    from raglab.report.run_report import write_run_report

    kept_cfg = composed.lookup(overrides(out_b, "r3"))
    assert kept_cfg is not None
    shutil.copytree(r3, tmp_path / "r3b")
    write_run_report(r3, name="n", diffs=[], plots=False, config=kept_cfg.config)
    write_run_report(tmp_path / "r3b", name="n", diffs=[], plots=False)
    for f in ("report.md", "report.html"):
        assert (r3 / f).read_text().replace(str(r3), "R") == \
            (tmp_path / "r3b" / f).read_text().replace(str(tmp_path / "r3b"), "R")

    other = _run(tmp_path, *overrides(out_b, "r4")[:-1], "k=2")  # another value: composed
    assert other.returncode == 0 and other.stderr.strip().endswith("HYDRA")

    missing = _run(tmp_path, *overrides(tmp_path / "nope" / "out.jsonl", "r5"))
    assert missing.stderr.strip().endswith("NO-HYDRA")
    assert missing.returncode == 2 and "out.jsonl" in missing.stderr
    assert not (tmp_path / "r5").exists() or not any((tmp_path / "r5").iterdir())


JOB = JobInfo(output_dir="/x", task_overrides=["k=3", "system.path=/a/out.jsonl"],
              choices={"system": "replay", "hydra/job_logging": "none",
                       "hydra/hydra_logging": "none"})
HYDRA = {"run": {"dir": "outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}"}, "job": {"chdir": False},
         "output_subdir": None, "verbose": False, "mode": "RUN",
         "callbacks": {"sweep_summary": {"_target_": "raglab.runner.sweep.SweepSummary"}}}


def _config(cache: Path) -> dict:
    return {"k": 3, "system": {"name": "replay", "path": "/a/out.jsonl"},
            "cache_dir": str(cache), "plugins": []}


def _keep(cache: Path, overrides: list[str], config: dict) -> None:
    composed.keep(overrides, config, HYDRA["run"]["dir"], JOB, config,
                  composed.yaml_text(config))


def test_lookup_sets_the_path_values_of_the_command(tmp_path):
    cache = tmp_path / "c"
    ov = ["k=3", "system.path=/a/out.jsonl", f"cache_dir={cache}"]
    _keep(cache, ov, _config(cache))
    same = composed.lookup(ov)
    assert same is not None and same.config == _config(cache)
    assert same.job_args["kept"] and same.job_args["kept_yaml"] == composed.yaml_text(
        _config(cache))
    moved = composed.lookup(["k=3", "system.path=/b/other.jsonl", f"cache_dir={cache}"])
    assert moved is not None and moved.config["system"]["path"] == "/b/other.jsonl"
    assert moved.job_args["task_overrides"] == ["k=3", "system.path=/b/other.jsonl"]
    assert moved.job_args["kept"] and moved.job_args["kept_yaml"] is None  # written anew
    assert composed.lookup(["k=4", "system.path=/a/out.jsonl", f"cache_dir={cache}"]) is None
    assert composed.lookup(["k=3", f"cache_dir={cache}", "system.path=/a/out.jsonl"]) is None


def test_a_changed_config_file_or_version_composes_again(tmp_path, monkeypatch):
    cache = tmp_path / "c"
    ov = ["k=3", f"cache_dir={cache}"]
    _keep(cache, ov, _config(cache))
    assert composed.lookup(ov) is not None
    monkeypatch.setattr(composed, "_CONF_KEY", "0123456789abcdef")
    assert composed.lookup(ov) is None


def test_conf_key_changes_with_any_config_file(tmp_path, monkeypatch):
    import raglab.commands.common as common

    conf = tmp_path / "conf"
    shutil.copytree(common.conf_dir(), conf)
    monkeypatch.setattr(common, "conf_dir", lambda: conf)
    monkeypatch.setattr(composed, "_CONF_KEY", None)
    before = composed.conf_key()
    (conf / "system" / "replay.yaml").write_text(
        (conf / "system" / "replay.yaml").read_text() + "\n# changed\n")
    monkeypatch.setattr(composed, "_CONF_KEY", None)
    assert composed.conf_key() != before


@pytest.mark.parametrize("overrides, config, hydra", [
    (["run_name=${k}"], {}, {}),                                  # an interpolation
    (["+x.api_key=sk-abcdefghijklmnop"], {}, {}),                 # a secret on the line
    ([], {"tracking": {"uri": "http://u:pw-abcdefghij@h/"}}, {}),  # a secret in the config
    ([], {"dataset": {"cases": "${oc.env:CASES}"}}, {}),          # read from the environment
    ([], {"plugins": ["my_components"]}, {}),                     # a plugin may register configs
    (["hydra.job.chdir=true"], {}, {}),                           # Hydra's own settings
    ([], {}, {"job": {"chdir": True}}),
    ([], {}, {"run": {"dir": "runs/${hydra.job.name}"}}),
    ([], {}, {"job": {"chdir": False, "env_set": {"A": "1"}}}),
])
def test_what_can_change_outside_the_overrides_is_never_kept(overrides, config, hydra):
    unresolved = {"k": 3, "plugins": [], **config}
    assert composed.keepable(["k=3"], {"k": 3, "plugins": []}, HYDRA, JOB.choices)
    assert not composed.keepable(["k=3", *overrides], unresolved, {**HYDRA, **hydra},
                                 JOB.choices)


def test_the_shipped_cache_dir_is_the_one_looked_in():
    from raglab.commands.common import conf_dir

    shipped = yaml.safe_load((conf_dir() / "config.yaml").read_text())
    assert shipped["cache_dir"] == composed.DEFAULT_CACHE_DIR


def test_run_dir_pattern_is_formatted_as_hydras_now_resolver():
    from datetime import datetime

    now = datetime(2026, 12, 1, 9, 5, 7)
    assert composed.run_dir_of("outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}", now) == \
        "outputs/2026-12-01/09-05-07"


scalar = st.one_of(st.text(max_size=12), st.integers(), st.floats(allow_nan=False),
                   st.booleans(), st.none(),
                   st.sampled_from(["yes", "off", "1e3", "0x1f", "null", "~", "", " a ",
                                    "ünï", "a: b", "- x", "/p/q.jsonl", "1_000", ".inf"]))
plain = st.recursive(scalar, lambda c: st.one_of(st.lists(c, max_size=3),
                                                 st.dictionaries(st.text(max_size=6), c,
                                                                 max_size=3)), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(cfg=st.dictionaries(st.text(min_size=1, max_size=8), plain, max_size=5))
def test_yaml_text_is_omegaconfs_to_the_byte(cfg):
    from omegaconf import OmegaConf

    try:
        want = OmegaConf.to_yaml(OmegaConf.create(cfg))
    except Exception:  # noqa: BLE001 - a key OmegaConf refuses cannot be a config
        return
    assert composed.yaml_text(cfg) == want


def test_a_configuration_that_scrubbing_changes_is_not_kept(tmp_path):
    cache = tmp_path / "c"
    config = {**_config(cache), "run_name": "uses-sk-abcdefghijklmnop"}
    public = {**config, "run_name": "uses-***"}  # an environment secret was scrubbed
    composed.keep(["k=3", f"cache_dir={cache}"], config, HYDRA["run"]["dir"], JOB, public,
                  composed.yaml_text(public))
    assert not (cache / "compose").exists()
