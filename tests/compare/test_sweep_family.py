"""The sweep-wide family of ``raglab compare SWEEP``: every pair of jobs per headline metric,
through the CLI on a sweep directory of replayed jobs written by hand, and on the sweep's
MLflow parent run (a real sqlite store)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.compare.labelled_runs import VERSIONS
from tests.conftest import run_cli

N = 80


def _job(path: Path, k: int, faith: np.ndarray, recall: np.ndarray) -> None:
    path.mkdir(parents=True)
    recs = [{"case_id": f"c{i:03d}", "tags": {"intent": "hr" if i % 2 else "billing"},
             "gold": {"answerable": True}, "verdicts": [], "error": None,
             "output": {"case_id": f"c{i:03d}", "answer": "a", "context": []},
             "metrics": {"faithfulness": float(f), "final.evidence_recall": float(r)}}
            for i, (f, r) in enumerate(zip(faith, recall))]
    (path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (path / "metrics.json").write_text(json.dumps({
        "overall": {"faithfulness": float(faith.mean()),
                    "final.evidence_recall": float(recall.mean())},
        "slices": {}, "metric_versions": VERSIONS, "n_cases": N, "n_quarantined": 0,
        "errors": 0, "work": {}}))
    (path / "config.yaml").write_text(f"k: {k}\n")


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    """Four jobs ``k=1..4``: faithfulness about 0.5 in jobs 1-3 and 0.95 in job 4 (a
    clear winner); evidence recall the same in every job (no job separable)."""
    d = tmp_path_factory.mktemp("family") / "sw"
    rng = np.random.default_rng(11)
    recall = rng.integers(0, 3, N) / 2.0
    for num, k in enumerate((1, 2, 3, 4)):
        p = 0.95 if k == 4 else 0.5
        _job(d / str(num), k, (rng.random(N) < p).astype(float), recall)
    (d / "multirun.yaml").write_text("hydra:\n  sweeper:\n    params:\n      k: 1,2,3,4\n")
    return d


def test_compare_sweep_writes_the_family_and_shows_the_best_group(sweep_dir):
    res = run_cli("compare", str(sweep_dir), "--baseline", "0", "--out", "out",
                  cwd=sweep_dir.parent)
    assert res.returncode == 0, res.stderr
    out = sweep_dir.parent / "out"
    fam = json.loads((out / "compare.json").read_text())["family"]
    assert fam["method"] == "randomised Tukey HSD" and fam["alpha"] == 0.05
    assert fam["n_permutations"] == 2000 and fam["n_shared_cases"] == N
    assert fam["best_group"] == {"final.evidence_recall": ["k=1", "k=2", "k=3", "k=4"],
                                 "faithfulness": ["k=4"]}
    pairs = {(p["a"], p["b"], p["metric"]): p for p in fam["pairs"]}
    assert len(pairs) == 6 * 2
    assert all(p["p_adjusted"] == 1.0 and p["delta"] == 0.0
               for (_, _, m), p in pairs.items() if m == "final.evidence_recall")
    winner = [p for (a, b, m), p in pairs.items() if m == "faithfulness" and b == "k=4"]
    assert len(winner) == 3 and all(p["p_adjusted"] < 0.01 and p["delta"] > 0.3
                                    for p in winner)
    md = (out / "compare.md").read_text()
    assert "## Best group per metric (every pair of jobs, family-wise)" in md
    assert "| faithfulness | k=4 (" in md and "| every job | 4 of 4 | 80 |" in md
    html = (out / "compare.html").read_text()
    assert '<table class="family">' in html and "<td>every job</td>" in html
    assert "best group (family-wise, alpha 0.05): k=4" in res.stdout
    # the setting is read, recorded and changes the permutations
    res = run_cli("compare", str(sweep_dir), "--baseline", "0", "--out", "out2", "--set",
                  "family_permutations=99", cwd=sweep_dir.parent)
    assert res.returncode == 0, res.stderr
    fam = json.loads((sweep_dir.parent / "out2" / "compare.json").read_text())["family"]
    assert fam["n_permutations"] == 99
    assert min(p["p_adjusted"] for p in fam["pairs"]) == pytest.approx(1 / 100)


@pytest.mark.slow  # a sqlite store's creation takes most of 10 s
def test_the_parent_run_gets_the_family_p_values(sweep_dir, tmp_path):
    """``log_to_parent`` on a sqlite store: each pair's adjusted p-value and each job's
    place in the best group as metrics of the parent run."""
    from mlflow.tracking import MlflowClient

    from raglab.compare.config import CompareCfg
    from raglab.compare.sweep import compare_sweep, load_sweep, log_to_parent
    from raglab.tracking.keys import metric_key

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    parent = client.create_run(client.create_experiment("sweeps")).info.run_id
    jobs, params = load_sweep(str(sweep_dir), uri)
    sc = compare_sweep(str(sweep_dir), jobs, params, jobs[0], CompareCfg())
    log_to_parent(sc, parent, uri, [])
    logged = client.get_run(parent).data.metrics
    fam = {k: v for k, v in logged.items() if k.startswith("family.")}
    assert len(fam) == 12 + 2 * 4
    faith = metric_key("faithfulness")
    for p in sc.family["pairs"]:
        a, b = p["a"][2:], p["b"][2:]   # k=N is job N - 1
        key = f"family.{int(a) - 1}.{int(b) - 1}.{metric_key(p['metric'])}.p_adjusted"
        assert fam[key] == pytest.approx(p["p_adjusted"])
    assert [fam[f"family.{n}.{faith}.best_group"] for n in range(4)] == [0.0, 0.0, 0.0, 1.0]
