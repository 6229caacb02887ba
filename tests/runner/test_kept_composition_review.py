"""A kept composition is used only where it gives exactly what Hydra's path gives."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from raglab.commands import composed
from tests.runner.test_kept_composition import _outputs, _run


def _base(tmp_path: Path, tiny, run_dir: str) -> list[str]:
    corpus, cases = tiny
    return ["system=replay", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
            "dataset.labels=null", "tracking=none", f"hydra.run.dir={tmp_path / run_dir}",
            f"cache_dir={tmp_path / 'cache'}", "progress=off"]


def test_a_key_given_twice_takes_its_last_value_as_hydra_does(tmp_path, tiny):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    out_a, out_b = _outputs(tmp_path / "a" / "out.jsonl"), _outputs(tmp_path / "b" / "out.jsonl")
    first = _run(tmp_path, *_base(tmp_path, tiny, "r1"), f"system.path={out_a}",
                 f"system.path={out_a}")
    assert first.returncode == 0, first.stderr
    # the first of the two differs: Hydra takes the last one, out_a
    again = _run(tmp_path, *_base(tmp_path, tiny, "r2"), f"system.path={out_b}",
                 f"system.path={out_a}")
    assert again.returncode == 0, again.stderr
    config = yaml.safe_load((tmp_path / "r2" / "config.yaml").read_text())
    assert config["system"]["path"] == str(out_a)


def test_lookup_refuses_a_substituted_key_set_twice(tmp_path):
    cache = tmp_path / "c"
    ov = [f"cache_dir={cache}", "system.path=/a/x.jsonl", "system.path=/a/x.jsonl"]
    assert composed.shape(ov) == composed.shape([f"cache_dir={cache}", "system.path=/b/y",
                                                 "system.path=/a/x.jsonl"])
    assert composed.lookup([f"cache_dir={cache}", "system.path=/b/y",
                            "system.path=/a/x.jsonl"]) is None


def test_a_path_leaf_also_set_above_or_below_it_is_not_kept(tmp_path):
    c = f"cache_dir={tmp_path / 'c'}"
    for ov in (["hydra.run.dir=runs/a", "hydra.run.dir=runs/a"],
               ["x.y.path=a/b", "x.y={path:a/b}"], ["x.y={path:a/b}", "x.y.path=a/b"],
               ["x.path=a/b", "++x.path=a/b"], ["x.path=a/b", "+x.path.z=1"]):
        assert not composed._overrides_keepable([c, *ov]), ov
    # a config group above a leaf is chosen before any value is set: that is fine
    assert composed._overrides_keepable([c, "system=replay", "system.path=a/b",
                                         "hydra.run.dir=runs/a"])


def test_an_entry_that_cannot_be_written_only_means_composing_again(tmp_path, tiny):
    """keep() is best effort: a failed write (here the entry's name is taken by a
    directory) leaves the run as it was before anything was kept."""
    (tmp_path / "a").mkdir()
    out = _outputs(tmp_path / "a" / "out.jsonl")
    ov = [*_base(tmp_path, tiny, "r1"), f"system.path={out}"]
    cache = tmp_path / "cache"
    first = _run(tmp_path, *ov)
    assert first.returncode == 0, first.stderr
    (entry,) = (cache / "compose").glob("*.json")
    entry.unlink()
    entry.mkdir()
    (entry / "x").write_text("")
    shutil.rmtree(tmp_path / "r1")
    again = _run(tmp_path, *ov)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "r1" / "metrics.json").is_file()


def test_shipped_defaults_that_cannot_be_kept_are_still_given(tmp_path, monkeypatch):
    from raglab.commands import compose

    monkeypatch.setattr(compose, "_DEFAULTS", None)
    taken = tmp_path / "c" / "defaults" / f"config-{composed.conf_key()}.json"
    taken.mkdir(parents=True)  # its name is taken: it can be neither read nor written
    (taken / "x").write_text("")
    defaults = compose.shipped_defaults(tmp_path / "c")
    assert defaults is not None and defaults["k"] == 5


def test_a_cache_dir_of_an_unknown_users_home_is_one_line_as_before(tmp_path, tiny):
    """Looking for a kept composition comes before Hydra reads the overrides: a value
    pathlib cannot expand is Hydra's one-line error (exit 2), not a traceback."""
    (tmp_path / "a").mkdir()
    out = _outputs(tmp_path / "a" / "out.jsonl")
    ov = [o for o in _base(tmp_path, tiny, "r1") if not o.startswith("cache_dir=")]
    got = _run(tmp_path, *ov, f"system.path={out}", "cache_dir=~no-such-user-here/c")
    assert got.returncode == 2, got.stderr
    assert "Traceback" not in got.stderr and "raglab: error: override:" in got.stderr


def test_a_key_too_long_for_a_file_name_finds_nothing_kept(tmp_path):
    """(Hydra itself then fails on it with a traceback, as it did before.)"""
    assert composed.lookup([f"cache_dir={tmp_path}", "x" * 300 + "=a/b"]) is None
