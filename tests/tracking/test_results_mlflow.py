"""Compare, sweep-compare and decide results logged to MLflow (a real sqlite store), read
back with MLflow's own client."""

import json

import pytest

from tests.conftest import run_cli

# end-to-end runs against a real MLflow store: in the slow suite
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A 2-job sweep (k=1,3) of the first 20 demo cases, tracked: (dir, uri, parent, jobs)."""
    from mlflow.tracking import MlflowClient

    from raglab.data.dataset import resolve_path

    d = tmp_path_factory.mktemp("results")
    lines = resolve_path("pkg://raglab/datasets/demo/cases.jsonl").read_text().splitlines()[:20]
    (d / "cases.jsonl").write_text("\n".join(lines) + "\n")
    uri = f"sqlite:///{d / 'mlflow.db'}"
    res = run_cli("run", "-m", f"dataset.cases={d / 'cases.jsonl'}", "dataset.labels=null",
                  f"tracking.uri={uri}", "hydra.sweep.dir=sw", "k=1,3", cwd=d, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("raglab")
    parent = next(r for r in client.search_runs([exp.experiment_id])
                  if "mlflow.parentRunId" not in r.data.tags)
    jobs = [parent.data.tags[f"raglab.sweep.job.{n}"] for n in range(2)]
    STDOUT[:] = [res.stdout]
    return d, uri, parent.info.run_id, jobs


#: the sweep's own output (the module's fixture keeps its four-value shape)
STDOUT: list[str] = []


def _client(uri):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _confirmatory(rows):
    from raglab.metrics.catalog import HEADLINE

    return [r for r in rows if r["slice"] is None and r["metric"] in HEADLINE]


def test_compare_logs_the_confirmatory_rows_to_the_candidate_once(store):
    from raglab.tracking.keys import metric_key

    d, uri, _, (base, cand) = store
    res = run_cli("compare", base, cand, "--uri", uri, "--out", "cmp", cwd=d)
    assert res.returncode == 0, res.stderr
    rows = _confirmatory(json.loads((d / "cmp" / "compare.json").read_text())["rows"])
    assert len(rows) >= 10
    client = _client(uri)
    metrics = client.get_run(cand).data.metrics
    logged = {k: v for k, v in metrics.items() if k.startswith("compare.")}
    expected = {}
    for r in rows:
        for fig in ("delta", "ci_low", "ci_high", "p_adjusted"):
            if r[fig] is not None:
                expected[f"compare.{metric_key(r['metric'])}.{fig}"] = r[fig]
    assert logged == pytest.approx(expected)
    assert any(k.endswith(".p_adjusted") for k in logged)
    assert f"compare.{metric_key('final.evidence_recall')}.delta" in logged
    assert not any("slice" in k for k in logged)  # overall rows only
    arts = {a.path for a in client.list_artifacts(cand, "compare")}
    assert "compare/compare.html" in arts
    assert client.get_run(cand).data.tags["raglab.compared_with"] == base
    # the same comparison again: nothing added to any metric's history
    res = run_cli("compare", base, cand, "--uri", uri, "--out", "cmp2", cwd=d)
    assert res.returncode == 0, res.stderr
    for key in expected:
        assert len(client.get_metric_history(cand, key)) == 1, key
    assert client.get_run(base).data.metrics.keys().isdisjoint(expected)


def test_a_sweep_comparison_logs_each_jobs_deltas_and_the_heat_map_to_the_parent(store):
    from raglab.tracking.keys import metric_key

    d, uri, parent, _ = store
    res = run_cli("compare", parent, "--baseline", "0", "--uri", uri, "--out", "sc", cwd=d)
    assert res.returncode == 0, res.stderr
    tables = json.loads((d / "sc" / "compare.json").read_text())["tables"]
    client = _client(uri)
    run = client.get_run(parent)
    logged = {k: v for k, v in run.data.metrics.items() if k.startswith("sweep.")}
    expected = _sweep_figures(tables, baseline="0")
    assert expected and logged == pytest.approx(expected)
    assert run.data.tags["raglab.sweep.baseline"] == "0"
    arts = {a.path for a in client.list_artifacts(parent, "compare")}
    assert "compare/compare.html" in arts
    assert "data:image/png;base64" in (d / "sc" / "compare.html").read_text()  # the heat map
    res = run_cli("compare", parent, "--baseline", "0", "--uri", uri, "--out", "sc2", cwd=d)
    assert res.returncode == 0, res.stderr
    for key in expected:
        assert len(client.get_metric_history(parent, key)) == 1, key
    # another baseline replaces every figure: job 1's become 0, job 0's hold its difference
    res = run_cli("compare", parent, "--baseline", "1", "--uri", uri, "--out", "sc1", cwd=d)
    assert res.returncode == 0, res.stderr
    again = _sweep_figures(json.loads((d / "sc1" / "compare.json").read_text())["tables"],
                           baseline="1")
    delta = f"sweep.0.{metric_key('final.evidence_recall')}.delta"
    assert again[delta] == pytest.approx(-expected[delta.replace('sweep.0', 'sweep.1')])
    assert again.keys() == expected.keys()
    now = {k: v for k, v in client.get_run(parent).data.metrics.items()
           if k.startswith("sweep.")}
    assert now == pytest.approx(again)
    assert client.get_run(parent).data.tags["raglab.sweep.baseline"] == "1"
    # and back (the later tests read the parent as the sweep left it)
    res = run_cli("compare", parent, "--baseline", "0", "--uri", uri, "--out", "sc3", cwd=d)
    assert res.returncode == 0, res.stderr
    assert {k: v for k, v in client.get_run(parent).data.metrics.items()
            if k.startswith("sweep.")} == pytest.approx(expected)


def _sweep_figures(tables: dict, baseline: str) -> dict[str, float]:
    """The parent's expected ``sweep.*`` figures of a two-job sweep comparison: the other
    job's against ``baseline``, the baseline's own 0 (its difference from itself)."""
    from raglab.tracking.keys import metric_key

    other = "1" if baseline == "0" else "0"
    out: dict[str, float] = {}
    for metric, cells in tables.items():
        (cell,) = cells.values()
        figs = {f: cell[f] for f in ("delta", "ci_low", "ci_high", "p_adjusted")
                if cell.get(f) is not None}
        out.update({f"sweep.{other}.{metric_key(metric)}.{f}": v for f, v in figs.items()})
        if figs:
            out.update({f"sweep.{baseline}.{metric_key(metric)}.{f}": v for f, v in
                        {"delta": 0.0, "ci_low": 0.0, "ci_high": 0.0, "p_adjusted": 1.0}.items()})
    return out


def test_decide_tags_the_candidate_and_logs_the_record(store):
    d, uri, _, (base, cand) = store
    res = run_cli("decide", base, cand, "gates=default", "--uri", uri, "--study", "st",
                  cwd=d)
    assert res.returncode in (0, 1, 4), res.stderr
    decision = {0: "GO", 1: "NO-GO", 4: "INCONCLUSIVE"}[res.returncode]
    client = _client(uri)
    tags = client.get_run(cand).data.tags
    assert tags["raglab.decision"] == decision
    assert tags["raglab.decision.gates"] == "default"
    arts = {a.path.rsplit(".", 1)[-1]: a.path for a in client.list_artifacts(cand, "decision")}
    assert set(arts) == {"md", "json", "html"}
    local = client.download_artifacts(cand, arts["html"], str(d / "dl"))
    html = open(local, encoding="utf-8").read()
    assert f"<h1>Decision: {decision}" in html and "<table>" in html
    assert "<script" not in html
    # the record (.md, .json, .html) and the study's index of decisions (decisions.md)
    assert sorted(p.suffix for p in (d / "st").iterdir()) == [".html", ".json", ".md", ".md"]
    assert (d / "st" / "decisions.md").is_file()


def test_the_sweep_says_whether_its_best_job_is_significantly_better(store):
    out = STDOUT[0]
    best = next(ln for ln in out.splitlines() if ln.startswith("best "))
    assert best.startswith("best final.evidence_recall ↑: job 1 (k=3)"), best
    assert "significantly better than the runner-up, job 0 (k=1)" in best
    assert "(paired, alpha 0.05): +" in best and "n=" in best


def test_the_sweep_address_opens_its_jobs_sorted_best_first_on_the_chart_view(store):
    d, uri, parent, _ = store
    url = next(ln for ln in STDOUT[0].splitlines() if "then open" in ln)
    assert url.endswith("&compareRunsMode=CHART")
    exp = _client(uri).get_experiment_by_name("raglab")
    view = json.loads(exp.tags[f"mlflow.sharedViewState.raglab-sweep-{parent[:12]}"])
    state = json.loads(view["state"])
    assert state["orderByKey"] == "metrics.`final.evidence_recall`"
    assert state["orderByAsc"] is False


def test_slices_in_mlflow_default_to_the_headline_metrics(store):
    from raglab.metrics.catalog import HEADLINE
    from raglab.tracking.keys import metric_key, parse_slice_key

    d, uri, _, (base, _cand) = store
    metrics = _client(uri).get_run(base).data.metrics
    sliced = {parse_slice_key(k)[2] for k in metrics
              if k.startswith("slice/") and "/diagnosis." not in k}
    assert sliced and sliced <= {metric_key(m) for m in HEADLINE} | {"n"}
    assert "candidate.ndcg_at_10" in metrics  # overall: every metric
    summary = json.loads((d / "sw" / "0" / "metrics.json").read_text())
    assert any("candidate.ndcg@10" in ms for v in summary["slices"].values()
               for ms in v.values())  # the full table stays in metrics.json


def test_the_end_of_a_sweep_logs_every_job_against_job_0_to_the_parent(store):
    """As ``raglab compare PARENT --baseline 0`` would, without being asked: the files in
    the sweep directory, each job's deltas and intervals and the heat map on the parent;
    a later comparison adds nothing to any figure's history."""
    from raglab.tracking.keys import metric_key

    d, uri, parent, _ = store
    out = d / "sw" / "compare-vs-k=1"
    assert f"compared every job with job 0 (k=1): {out}/compare.md" in STDOUT[0]
    assert sorted(p.name for p in out.iterdir()) == ["compare.html", "compare.json",
                                                      "compare.md"]
    tables = json.loads((out / "compare.json").read_text())["tables"]
    expected = _sweep_figures(tables, baseline="0")
    assert f"sweep.1.{metric_key('final.evidence_recall')}.delta" in expected
    client = _client(uri)
    run = client.get_run(parent)
    assert {k: v for k, v in run.data.metrics.items() if k.startswith("sweep.")} == \
        pytest.approx(expected)
    assert run.data.tags["raglab.sweep.baseline"] == "0"
    assert {a.path for a in client.list_artifacts(parent, "compare")} == \
        {"compare/compare.html", "compare/compare.json", "compare/compare.md"}
    # (an earlier test of this module compared against job 1 and back: histories grew)
    before = {key: len(client.get_metric_history(parent, key)) for key in expected}
    res = run_cli("compare", parent, "--baseline", "0", "--uri", uri, "--out", "again", cwd=d)
    assert res.returncode == 0, res.stderr
    assert "(0 new or changed sweep.* figures" in res.stdout
    assert {key: len(client.get_metric_history(parent, key)) for key in expected} == before


def test_the_parent_description_carries_the_terminals_best_line(store):
    from raglab.report.summary import _md

    _, uri, parent, _ = store
    best = next(ln for ln in STDOUT[0].splitlines() if ln.startswith("best "))
    assert "better than the runner-up" in best
    note = _client(uri).get_run(parent).data.tags["mlflow.note.content"]
    assert _md(best) in note.splitlines()


def test_a_sweep_whose_jobs_cannot_be_compared_says_why_and_succeeds(tmp_path, tiny):
    corpus, cases = tiny
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    common = [f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null",
              f"tracking.uri={uri}", f"cache_dir={tmp_path / 'c'}", "progress=off"]
    # graded by two graders: metric versions differ
    res = run_cli("run", "-m", *common, "grader=heuristic,none", "hydra.sweep.dir=two",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith("sweep comparison")]
    assert line.startswith("sweep comparison not made: metric versions differ")
    assert not list((tmp_path / "two").glob("compare-vs-*"))
    # one job: nothing to compare
    res = run_cli("run", "-m", *common, "k=3", "hydra.sweep.dir=one", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "sweep comparison not made: the sweep has 1 finished job (nothing to compare)" \
        in res.stdout.splitlines()
