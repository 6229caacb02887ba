"""A killed run can leave half-written temporary files (``.records.jsonl.XXXX.tmp``,
``.metrics.json.XXXX.tmp``, ``.slices.png.tmp.png``) in its directory; the next run of the
same directory removes them, and nothing else."""

from __future__ import annotations

from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl


def test_the_next_run_of_a_directory_removes_what_a_killed_one_left(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    run = tmp_path / "run"
    run.mkdir()
    stale = [run / ".records.jsonl.k2j3h4.tmp", run / ".metrics.json.x8f9.tmp",
             run / ".slices.png.tmp.png"]
    for f in stale:
        f.write_bytes(b"x" * 1000)
    mine = run / "notes.txt"
    mine.write_text("the user's own file")
    p = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                "dataset.labels=null", "tracking=none", "progress=off", "k=3",
                "candidate_depth=5", "metrics.cutoffs=[1,3,5]", f"cache_dir={tmp_path / 'c'}",
                f"hydra.run.dir={run}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert not any(f.exists() for f in stale)
    assert mine.read_text() == "the user's own file"
    assert (run / "metrics.json").is_file()
    assert not list(run.glob(".*.tmp")) and not list(run.glob(".*.tmp.png"))
