"""Issue 32 item 5: your dataset by its name. ``raglab init NAME`` validates the files and
writes ``conf/dataset/NAME.yaml``; a ``conf/`` in the working directory is on the search
path, so ``raglab run dataset=NAME`` works from a fresh folder; data that is not the demo is
never called "demo"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl


def _files(root: Path) -> tuple[Path, Path]:
    (root / "data").mkdir()
    return (write_jsonl(root / "data" / "faq-corpus.jsonl", TINY_CORPUS),
            write_jsonl(root / "data" / "faq.jsonl", TINY_CASES))


def _one_error_line(proc) -> str:
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_init_writes_the_dataset_config_and_the_name_composes(tmp_path, monkeypatch):
    _files(tmp_path)
    proc = run_cli("init", "faq", "--corpus", "data/faq-corpus.jsonl", "--cases",
                   "data/faq.jsonl", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "4 usable" in proc.stdout and "raglab run dataset=faq" in proc.stdout
    written = tmp_path / "conf" / "dataset" / "faq.yaml"
    import yaml

    node = yaml.safe_load(written.read_text())
    assert (node["name"], node["corpus"], node["cases"], node["labels"]) == \
        ("faq", "data/faq-corpus.jsonl", "data/faq.jsonl", None)
    # the working directory's conf/ is on the search path: dataset=faq composes there
    from raglab.commands.compose import compose_config
    from raglab.config import parse_run_config

    monkeypatch.chdir(tmp_path)
    cfg = parse_run_config(compose_config(["dataset=faq"]))
    assert cfg.dataset.name == "faq" and cfg.dataset.cases == "data/faq.jsonl"
    # an existing file is kept without --force
    again = run_cli("init", "faq", "--corpus", "data/faq-corpus.jsonl", "--cases",
                    "data/faq.jsonl", cwd=tmp_path)
    assert again.returncode == 2 and "--force" in _one_error_line(again)


@pytest.mark.parametrize("args, says", [
    (["demo", "--corpus", "data/faq-corpus.jsonl", "--cases", "data/faq.jsonl"],
     "shipped with raglab"),
    (["../x", "--corpus", "data/faq-corpus.jsonl", "--cases", "data/faq.jsonl"],
     "not a usable dataset name"),
    (["faq", "--corpus", "data/nope.jsonl", "--cases", "data/faq.jsonl"], "not found"),
    (["faq", "--cases", "data/faq.jsonl"], "--corpus"),
])
def test_init_refuses_with_one_line(tmp_path, args, says):
    _files(tmp_path)
    proc = run_cli("init", *args, cwd=tmp_path)
    assert proc.returncode == 2
    assert says in _one_error_line(proc)
    assert not (tmp_path / "conf").exists()


def test_init_names_the_line_of_a_bad_case(tmp_path):
    corpus, cases = _files(tmp_path)
    cases.write_text(cases.read_text() + '{"id": "t-9"}\n')
    proc = run_cli("init", "faq", "--corpus", str(corpus), "--cases", str(cases), cwd=tmp_path)
    assert proc.returncode == 2
    line = _one_error_line(proc)
    assert "faq.jsonl:5" in line and "t-9" in line
    assert not (tmp_path / "conf").exists()


@pytest.mark.slow
def test_init_then_run_by_name_from_a_fresh_folder_names_it_everywhere(tmp_path):
    """MLflow's dataset input and tag, the report, metrics.json and config.yaml say faq."""
    _files(tmp_path)
    assert run_cli("init", "faq", "--corpus", "data/faq-corpus.jsonl", "--cases",
                   "data/faq.jsonl", cwd=tmp_path).returncode == 0
    out = tmp_path / "run"
    proc = run_cli("run", "dataset=faq", "grader=none", f"hydra.run.dir={out}",
                   "progress=off", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "named" not in proc.stderr  # named by the config: no note
    assert json.loads((out / "metrics.json").read_text())["dataset"]["name"] == "faq"
    assert "- dataset: faq" in (out / "report.md").read_text()
    assert "name: faq" in (out / "config.yaml").read_text()
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = mlflow.search_runs(experiment_names=["raglab"], output_format="list")[0]
    assert run.data.tags["raglab.dataset"] == "faq"
    assert [d.dataset.name for d in run.inputs.dataset_inputs] == ["faq"]


def test_the_demos_name_is_never_given_to_other_files(tmp_path):
    """Overriding the demo's files without a name names the dataset after the cases file,
    said once; the validate command and the run's files agree."""
    from raglab.commands.compose import compose_config
    from raglab.config import parse_run_config
    from raglab.data.dataset import dataset_identity

    corpus, cases = _files(tmp_path)
    cfg = parse_run_config(compose_config([f"dataset.corpus={corpus}",
                                           f"dataset.cases={cases}"]))
    assert cfg.dataset.name == "faq" and cfg.dataset._named_after_cases
    assert dataset_identity("demo", str(corpus), str(cases))["name"] == "faq"
    cfg = parse_run_config(compose_config([]))
    assert cfg.dataset.name == "demo" and not cfg.dataset._named_after_cases
    own = parse_run_config(compose_config([f"dataset.corpus={corpus}",
                                           f"dataset.cases={cases}", "dataset.name=kb"]))
    assert own.dataset.name == "kb"
    out = tmp_path / "run"
    proc = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                   "dataset.labels=null", "grader=none", "tracking=none", "progress=off",
                   f"hydra.run.dir={out}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    notes = [x for x in proc.stderr.splitlines() if "named 'faq' after its cases file" in x]
    assert len(notes) == 1, proc.stderr
    assert "name: faq" in (out / "config.yaml").read_text()
    assert json.loads((out / "metrics.json").read_text())["dataset"]["name"] == "faq"
    assert "demo" not in (out / "report.md").read_text().split("## ")[0].replace(
        "pkg://raglab/datasets/demo", "")
