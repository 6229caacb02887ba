"""raglab compare by MLflow run ids (a real sqlite store) and over sweeps."""

import json
import re
from pathlib import Path

import pytest

from tests.conftest import run_cli


def _client(uri):
    from mlflow.tracking import MlflowClient
    return MlflowClient(tracking_uri=uri)


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_mlflow_round_trip(tmp_path, tiny):
    corpus, cases = tiny
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ds = [f"dataset.corpus={corpus}", f"dataset.cases={cases}", f"tracking.uri={uri}"]
    for name, k in (("a", 1), ("b", 3)):
        res = run_cli("run", *ds, f"k={k}", f"hydra.run.dir={name}", f"run_name=k{k}",
                      cwd=tmp_path)
        assert res.returncode == 0, res.stderr
    client = _client(uri)
    exp = client.get_experiment_by_name("raglab")
    runs = {r.info.run_name: r.info.run_id for r in client.search_runs([exp.experiment_id])}
    base, cand = runs["k1"], runs["k3"]
    res = run_cli("compare", base, cand, "--uri", uri, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Downloading artifacts" not in res.stderr  # MLflow's progress bars stay off
    # default output: next to the candidate's run directory (its raglab.run_dir tag)
    out = tmp_path / "compare-k1-k3"
    data = json.loads((out / "compare.json").read_text())
    assert data["baseline"]["mlflow_run_id"] == base and data["candidate"]["mlflow_run_id"] == cand
    assert data["rows"]
    run = client.get_run(cand)
    assert run.data.tags["raglab.compared_with"] == base
    names = {a.path for a in client.list_artifacts(cand, "compare")}
    assert names == {"compare/compare.md", "compare/compare.html", "compare/compare.json"}
    # a killed run is incomplete
    client.set_terminated(cand, status="KILLED")
    res = run_cli("compare", base, cand, "--uri", uri, "--out", "x", cwd=tmp_path)
    assert res.returncode == 2 and "KILLED" in res.stderr and not (tmp_path / "x").exists()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    from raglab.data.dataset import resolve_path

    d = tmp_path_factory.mktemp("sweep")
    lines = resolve_path("pkg://raglab/datasets/demo/cases.jsonl").read_text().splitlines()[:20]
    (d / "cases.jsonl").write_text("\n".join(lines) + "\n")
    uri = f"sqlite:///{d / 'mlflow.db'}"
    res = run_cli("run", "-m", f"dataset.cases={d / 'cases.jsonl'}", "dataset.labels=null",
                  f"tracking.uri={uri}", "hydra.sweep.dir=sw", "k=3,5", "chunker.size=64,128",
                  cwd=d, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    return d, uri


def _cell(md: str, metric: str) -> list[str]:
    block = md.split(f"## {metric} (baseline")[1].split("\n## ")[0]
    return [ln for ln in block.splitlines() if ln.startswith("|")]


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_sweep_table(sweep):
    d, _ = sweep
    res = run_cli("compare", "sw", "--baseline", "chunker.size=64,k=3", cwd=d)
    assert res.returncode == 0, res.stderr
    out = d / "sw" / "compare-vs-k=3,chunker.size=64"
    data = json.loads((out / "compare.json").read_text())
    assert data["params"] == ["k", "chunker.size"]
    assert data["baseline"] == "k=3,chunker.size=64"
    assert sorted(j["name"] for j in data["jobs"]) == sorted(
        f"k={k},chunker.size={s}" for k in (3, 5) for s in (64, 128))
    md = (out / "compare.md").read_text()
    table = _cell(md, "final.evidence_recall")
    assert table[0] == "| k \\ chunker.size | 64 | 128 |"
    row3 = table[2].split(" | ")
    assert table[2].startswith("| 3 | baseline |")
    # each cell is that job's overall delta [CI] from its paired comparison
    for k, line in (("3", table[2]), ("5", table[3])):
        for col, s in ((1, "64"), (2, "128")):
            name = f"k={k},chunker.size={s}"
            if name == data["baseline"]:
                continue
            cell = data["tables"]["final.evidence_recall"][name]
            row = next(r for r in data["comparisons"][name]["rows"]
                       if r["metric"] == "final.evidence_recall" and r["slice"] is None)
            assert cell["delta"] == row["delta"]
            text = [c.strip(" |") for c in line.split(" | ")][col]
            assert text.startswith(f"{row['delta']:+.3f} [{row['ci_low']:+.3f}, "
                                   f"{row['ci_high']:+.3f}]")
            assert text.endswith("*") == cell["significant"]
    assert row3[0] == "| 3"
    # the same baseline by job number; the heat maps in the HTML
    res = run_cli("compare", "sw", "--baseline", "0", "--out", "by-number", cwd=d)
    assert res.returncode == 0, res.stderr
    html = (d / "by-number" / "compare.html").read_text()
    assert "heat map" in html and "data:image/png;base64," in html
    assert "Cases that fail under every job" in md
    fails = data["always_failing"]
    for x in fails:
        for job in data["jobs"]:
            recs = {json.loads(line)["case_id"]: json.loads(line)
                    for line in Path(d / "by-number", job["run_dir"], "records.jsonl")
                    .read_text().splitlines()}
            for m in x["metrics"]:
                v = recs[x["case_id"]]["metrics"][m]
                assert v is not None and (v < 1.0 if m != "false_refusal_rate" else v > 0)


@pytest.mark.slow  # an end-to-end run: in the slow suite
def test_sweep_bad_baseline_and_mlflow_parent(sweep):
    d, uri = sweep
    res = run_cli("compare", "sw", "--baseline", "k=7", "--out", "nope", cwd=d)
    assert res.returncode == 2 and "names no job" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (d / "nope").exists()
    client = _client(uri)
    exp = client.get_experiment_by_name("raglab")
    parent = next(r.info.run_id for r in client.search_runs([exp.experiment_id])
                  if "mlflow.parentRunId" not in r.data.tags)
    res = run_cli("compare", parent, "--baseline", "k=3,chunker.size=64", "--uri", uri,
                  "--out", "ml", cwd=d)
    assert res.returncode == 0, res.stderr
    data = json.loads((d / "ml" / "compare.json").read_text())
    assert data["params"] == ["k", "chunker.size"] and len(data["jobs"]) == 4
    assert re.fullmatch(r"[0-9a-f]{32}", data["jobs"][0]["number"])
