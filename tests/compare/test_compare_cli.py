"""raglab compare through the real CLI on real runs of the tiny dataset and a demo subset."""

import json
import shutil
from pathlib import Path

import pytest

from raglab.compare.comparison import ROW_KEYS
from tests.conftest import TINY_CASES, run_cli, write_jsonl


def _run(cwd: Path, name: str, *overrides: str) -> Path:
    res = run_cli("run", "tracking=none", f"hydra.run.dir={name}", *overrides, cwd=cwd)
    assert res.returncode == 0, res.stderr[-2000:]
    return cwd / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Runs of the tiny dataset: k=1 and k=3, a different grader setting, a case subset."""
    d = tmp_path_factory.mktemp("cmp")
    from tests.conftest import TINY_CORPUS
    write_jsonl(d / "corpus.jsonl", TINY_CORPUS)
    write_jsonl(d / "cases.jsonl", TINY_CASES)
    write_jsonl(d / "cases3.jsonl", TINY_CASES[:3])
    ds = [f"dataset.corpus={d / 'corpus.jsonl'}", f"dataset.cases={d / 'cases.jsonl'}"]
    out = {"dir": d,
           "k1": _run(d, "k1", *ds, "k=1", "chunker.size=64"),
           "k3": _run(d, "k3", *ds, "k=3"),
           "graded": _run(d, "graded", *ds, "k=3", "grader.support_threshold=50"),
           "three": _run(d, "three", ds[0], f"dataset.cases={d / 'cases3.jsonl'}", "k=3")}
    return out


def _listing(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


def test_compare_two_runs_writes_three_files(runs):
    d = runs["dir"]
    res = run_cli("compare", "k1", "k3", cwd=d)
    assert res.returncode == 0, res.stderr
    out = d / "compare-k1-k3"
    assert {p.name for p in out.iterdir()} == {"compare.md", "compare.html", "compare.json"}
    data = json.loads((out / "compare.json").read_text())
    assert {"rows", "flipped", "diagnoses", "versions", "warnings"} <= set(data)
    assert data["rows"] and all(tuple(r) == ROW_KEYS for r in data["rows"])
    overall = {r["metric"]: r for r in data["rows"] if r["slice"] is None}
    assert overall["final.evidence_recall"]["n"] == 3   # t-3 is unanswerable
    assert overall["acl_leak_rate"]["n"] == 4
    keys = {(r["slice"]["key"], r["slice"]["value"]) for r in data["rows"] if r["slice"]}
    assert keys == {("intent", "refunds"), ("intent", "exports"), ("intent", "support"),
                    ("source", "kb"), ("source", "none"), ("source", "policy"),
                    ("answerable", "yes"), ("answerable", "no")}
    # the terminal's headline table with intervals
    assert "final.evidence_recall" in res.stdout and " CI " in res.stdout
    assert "compare.md" in res.stdout
    md = (out / "compare.md").read_text()
    assert "## Headline metrics (overall)" in md and "Holm" in md
    # flipped cases carry the question read from the dataset
    flips = [x for f in data["flipped"].values() for w in ("pass_to_fail", "fail_to_pass")
             for x in f[w]]
    for x in flips:
        assert x["question"] == next(c["question"] for c in TINY_CASES if c["id"] == x["case_id"])


@pytest.mark.slow  # an end-to-end CLI run: CI's slow pass
def test_demo_subset_k3_against_k10(tmp_path, demo_subset):
    _run(tmp_path, "k3", *demo_subset, "k=3")
    _run(tmp_path, "k10", *demo_subset, "k=10")
    res = run_cli("compare", "k3", "k10", "--out", "cmp", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    r = next(r for r in data["rows"] if r["metric"] == "final.evidence_recall"
             and r["slice"] is None)
    assert r["n"] > 10 and r["delta"] is not None and r["ci_low"] <= r["delta"] <= r["ci_high"]
    assert r["delta"] >= 0   # more context can only hold more evidence
    assert "final.evidence_recall@10" in data["settings"]["unpaired_metrics"]
    html = (tmp_path / "cmp" / "compare.html").read_text()
    assert html.count("data:image/png;base64,") >= 2


def test_version_mismatch_exits_3_naming_the_family(runs):
    d = runs["dir"]
    before = _listing(d)
    res = run_cli("compare", "k3", "graded", cwd=d)
    assert res.returncode == 3, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "faithfulness" in lines[0]
    v3 = json.loads((runs["k3"] / "metrics.json").read_text())["metric_versions"]
    vg = json.loads((runs["graded"] / "metrics.json").read_text())["metric_versions"]
    assert v3["faithfulness"] in lines[0] and vg["faithfulness"] in lines[0]
    assert _listing(d) == before
    res = run_cli("compare", "k3", "graded", "--allow-version-mismatch", "--out", "vm", cwd=d)
    assert res.returncode == 0, res.stderr
    data = json.loads((d / "vm" / "compare.json").read_text())
    faith = [r for r in data["rows"] if r["metric"] == "faithfulness"]
    assert faith and not any(r["comparable"] for r in faith)
    assert any(r["comparable"] for r in data["rows"] if r["metric"] == "acl_leak_rate")
    assert "faithfulness" in data["warnings"][0]
    md = (d / "vm" / "compare.md").read_text().splitlines()
    assert md[2].startswith("> **Warning:** metric versions differ")


@pytest.mark.slow  # end to end (CLI runs): in the slow suite
def test_case_mismatch(runs):
    d = runs["dir"]
    before = _listing(d)
    res = run_cli("compare", "k3", "three", cwd=d)
    assert res.returncode == 2 and "--allow-case-mismatch" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and _listing(d) == before
    res = run_cli("compare", "k3", "three", "--allow-case-mismatch", "--out", "cm", cwd=d)
    assert res.returncode == 0, res.stderr
    data = json.loads((d / "cm" / "compare.json").read_text())
    assert "only the 3 cases in both runs" in data["warnings"][0]
    assert "WARNING" in res.stdout


@pytest.mark.slow  # end to end (CLI runs): in the slow suite
def test_incomplete_run(runs, tmp_path):
    part = tmp_path / "part"
    shutil.copytree(runs["k3"], part)
    lines = (part / "records.jsonl").read_text().splitlines(keepends=True)
    (part / "records.jsonl").write_text("".join(lines[:-1]))
    shutil.copytree(runs["k1"], tmp_path / "k1")
    res = run_cli("compare", "k1", "part", "--allow-case-mismatch", cwd=tmp_path)
    assert res.returncode == 2 and "did not finish" in res.stderr and "3 of its 4" in res.stderr
    assert not (tmp_path / "compare-k1-part").exists()
    res = run_cli("compare", "k1", "part", "--allow-case-mismatch", "--allow-incomplete",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (part / "metrics.json").unlink()
    res = run_cli("compare", "k1", "part", "--allow-case-mismatch", cwd=tmp_path)
    assert res.returncode == 2 and "metrics.json is missing" in res.stderr


@pytest.mark.parametrize("args, message", [
    (["nowhere", "k3"], "no such run directory or MLflow run id: nowhere"),
    (["empty", "k3"], "records.jsonl is missing"),
    (["0123456789abcdef0123456789abcdef", "k3"], "no MLflow store"),
    (["k1", "k3", "--baseline", "0"], "--baseline goes with one SWEEP"),
    (["k1"], "expected BASELINE CANDIDATE"),
    (["k1", "k3", "--set", "min_slice_n=0"], "min_slice_n"),
])
def test_bad_input_one_line_exit_2_nothing_written(runs, args, message):
    d = runs["dir"]
    (d / "empty").mkdir(exist_ok=True)
    before = _listing(d)
    res = run_cli("compare", *args, cwd=d)
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in res.stderr
    assert _listing(d) == before


@pytest.mark.slow  # end to end (CLI runs): in the slow suite
def test_unknown_mlflow_id_in_an_existing_store(runs, tmp_path):
    from raglab.tracking.mlflow_store import log_run_dir

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    log_run_dir(runs["k1"], uri, "raglab")
    res = run_cli("compare", "f" * 32, str(runs["k3"]), "--uri", uri, cwd=tmp_path)
    assert res.returncode == 2 and "unknown MLflow run id" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_help_is_fast_and_light(runs):
    res = run_cli("compare", "--help", cwd=runs["dir"])
    assert res.returncode == 0 and "--baseline" in res.stdout and "--allow-case-mismatch" in \
        res.stdout
    import subprocess
    import sys
    code = ("import sys\nfrom raglab.cli import main\ntry:\n main(['compare','--help'])\n"
            "except SystemExit:\n pass\n"
            "heavy=[m for m in ('numpy','mlflow','matplotlib','scipy','hydra')\n"
            "       if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
