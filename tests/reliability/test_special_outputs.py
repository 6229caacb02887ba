"""An output that exists and is not a regular file (a FIFO here, the stand-in for a device
such as /dev/null) is refused with one line and left as it is: the safe write (a temporary
file renamed into place) used to replace it by a regular file (``cases draft
out=/dev/null`` run as root replaced the machine's /dev/null)."""

from __future__ import annotations

import os
import stat

from tests.cases.test_draft import fake_drafter
from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl
from tests.llm.backends import ANTHROPIC


def _fifo(path):
    os.mkfifo(path)
    return path


def _refused(p, fifo) -> None:
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "is a FIFO, not a regular file" in p.stderr and fifo.name in p.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_cases_draft_refuses_a_fifo_as_its_output_before_any_request(tmp_path):
    only = ["drafter.kinds.cross_section=0", "drafter.kinds.unanswerable=0",
            "drafter.kinds.acl_restricted=0", "drafter.kinds.withdrawn_policy=0",
            "drafter.kinds.near_duplicate=0", "drafter.kinds.counter_common_knowledge=0"]
    fifo = _fifo(tmp_path / "out.jsonl")
    with ANTHROPIC.server(handler=fake_drafter) as srv:
        p = run_cli("cases", "draft", f"out={fifo}", "n=1", *only,
                    f"cache_dir={tmp_path / 'cache'}", cwd=tmp_path, env=ANTHROPIC.env(srv),
                    timeout=120)
        assert ANTHROPIC.requests(srv) == []
    _refused(p, fifo)
    # through a symlink too (the link's target is what would be replaced)
    link = tmp_path / "link.jsonl"
    link.symlink_to(fifo)
    with ANTHROPIC.server(handler=fake_drafter) as srv:
        p = run_cli("cases", "draft", f"out={link}", "n=1", *only,
                    f"cache_dir={tmp_path / 'cache'}", cwd=tmp_path, env=ANTHROPIC.env(srv),
                    timeout=120)
    _refused(p, fifo)
    assert link.is_symlink()


def test_validate_and_from_traffic_refuse_a_fifo(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    fifo = _fifo(tmp_path / "quarantine.jsonl")  # validate writes it in the working folder
    p = run_cli("validate", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                "dataset.labels=null", cwd=tmp_path, timeout=120)
    _refused(p, fifo)
    traffic = write_jsonl(tmp_path / "t.jsonl", [{"question": "q", "answer": "a"}])
    out = _fifo(tmp_path / "drafts.jsonl")
    p = run_cli("cases", "from-traffic", str(traffic), "--out", str(out), cwd=tmp_path,
                timeout=120)
    _refused(p, out)


def test_a_run_whose_records_file_is_a_fifo_is_refused(tmp_path):
    """records.jsonl is appended, not renamed: a FIFO there used to block the run."""
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    run = tmp_path / "run"
    run.mkdir()
    fifo = _fifo(run / "records.jsonl")
    p = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                "dataset.labels=null", "tracking=none", "progress=off",
                f"hydra.run.dir={run}", f"cache_dir={tmp_path / 'c'}", cwd=tmp_path,
                timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "records.jsonl: records.jsonl exists and is not a regular file" in p.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
