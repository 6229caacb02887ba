"""The runner without a subprocess: a run, its records, and a resume after a torn line."""

from __future__ import annotations

import json

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from raglab.commands.common import conf_dir
from raglab.commands.compose import register_schema_defaults
from raglab.config import parse_run_config
from raglab.data.record import read_records
from raglab.runner.run import Run
from tests.conftest import TINY_CASES, TINY_CORPUS, write_jsonl


def _cfg(tmp_path, *overrides):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    register_schema_defaults()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        c = compose(config_name="config", overrides=[
            "tracking=none", "progress=off", f"dataset.corpus={corpus}",
            f"dataset.cases={cases}", "dataset.labels=null", "chunker=sentence",
            "chunker.size=1", "chunker.overlap=0", "k=2", "candidate_depth=5",
            "metrics.cutoffs=[1,2,5]",
            f"cache_dir={tmp_path / 'cache'}", *overrides])
    resolved = OmegaConf.to_container(c, resolve=True)
    return parse_run_config(resolved), OmegaConf.to_yaml(OmegaConf.create(resolved))


def _stable(rec: dict) -> dict:
    rec = json.loads(json.dumps(rec))
    rec["output"].pop("latency_ms", None)
    rec["metrics"] = {k: v for k, v in rec["metrics"].items() if not k.startswith("latency_ms.")}
    return rec


def test_run_writes_typed_records_and_metrics(tmp_path):
    cfg, text = _cfg(tmp_path)
    metrics = Run(cfg, tmp_path / "run", text).execute()
    records = read_records(tmp_path / "run" / "records.jsonl")
    assert [r.case_id for r in records] == [c["id"] for c in TINY_CASES]
    assert metrics["n_cases"] == 4 and metrics["errors"] == 0
    assert metrics["overall"]["candidate.evidence_recall@5"] == 1.0
    graded = [r for r in records if r.graded]
    versions = metrics["metric_versions"]
    assert graded and all(v.grader == "heuristic" and v.version == versions[v.family]
                          for r in graded for v in r.verdicts)
    assert metrics["work"]["index_builds"] == 1


def test_resume_drops_a_torn_line_and_computes_only_the_rest(tmp_path):
    cfg, text = _cfg(tmp_path)
    Run(cfg, tmp_path / "ref", text).execute()
    ref = [_stable(json.loads(x))
           for x in (tmp_path / "ref" / "records.jsonl").read_text().splitlines()]
    # a run killed after two records, in the middle of writing the third
    run_dir = tmp_path / "killed"
    run_dir.mkdir()
    lines = (tmp_path / "ref" / "records.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "records.jsonl").write_text(lines[0] + lines[1] + lines[2][:40])
    (run_dir / "config.yaml").write_text(text)
    metrics = Run(cfg, run_dir, text).execute()
    got = [_stable(json.loads(x)) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    assert got == ref
    assert metrics["n_cases"] == 4
    assert metrics["work"]["retrievals"] == 0  # the two new cases' retrievals were cached


def test_a_replay_run_without_grader_writes_each_record_before_the_next_case(tmp_path,
                                                                             monkeypatch):
    """Cases answered inline (a replayed output, no grading) are done when they start: each
    is answered after the record before it is written (none ahead, no task each), and the
    event loop still gets its turn while they run (so a Ctrl-C lands at once)."""
    import asyncio

    from raglab.runner.records import RecordWriter
    from raglab.systems.replay import ReplaySystem
    from tests.benchmarks.replay_data import make

    paths = make(tmp_path / "data", 150, depth=3, n_slices=3, n_docs=30)
    register_schema_defaults()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        c = compose(config_name="config", overrides=[
            "system=replay", f"system.path={paths['outputs']}", "grader=none",
            "tracking=none", "progress=off", f"dataset.corpus={paths['corpus']}",
            f"dataset.cases={paths['cases']}", "dataset.labels=null",
            f"cache_dir={tmp_path / 'cache'}"])
    resolved = OmegaConf.to_container(c, resolve=True)
    count = {"answered": 0, "written": 0, "ahead": 0}
    loop_ran: list[int] = []  # the cases answered when a callback of the loop ran
    answer, append = ReplaySystem.answer, RecordWriter.append

    def answering(self, req):
        count["answered"] += 1
        count["ahead"] = max(count["ahead"], count["answered"] - count["written"])
        asyncio.get_running_loop().call_soon(lambda: loop_ran.append(count["answered"]))
        return answer(self, req)

    def appending(self, *args, **kwargs):
        count["written"] += 1
        return append(self, *args, **kwargs)

    monkeypatch.setattr(ReplaySystem, "answer", answering)
    monkeypatch.setattr(RecordWriter, "append", appending)
    metrics = Run(parse_run_config(resolved), tmp_path / "run",
                  OmegaConf.to_yaml(OmegaConf.create(resolved))).execute()
    assert metrics["n_cases"] == count["written"] == 150
    assert count["ahead"] == 1, count
    assert loop_ran and loop_ran[0] <= 64  # not only once every case is done
