"""Issue 24, first hour item 1: a real system adds fields of its own (a ``trace_id`` on the
answer, a ``chunk_id`` on a hit); they are kept, with one warning per run, and only what
contradicts the contract is refused."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from raglab.data.schema import ContractError, SystemOutput, accept_output
from tests.conftest import run_cli, write_jsonl

BASE = ["tracking=none", "metrics.cutoffs=[1,3,5]", "k=3", "candidate_depth=5", "grader=none",
        "dataset.labels=null"]


def _answer(cid: str) -> dict:
    out = {"answer": "Within 5 business days.", "trace_id": f"tr-{cid}",
           "candidates": [{"doc_id": "kb/a", "text": "", "chunk_id": 7, "section": "Refunds"}],
           "context": [{"doc_id": "kb/a", "text": "", "chunk_id": 7}]}
    if cid == "t-3":  # contradicts itself: chunk_id given twice with two values
        out["candidates"][0]["metadata"] = {"chunk_id": 8}
    if cid == "t-4":  # a field the contract names, with the wrong type: refused as before
        out["answer"] = 5
    return out


class _Adds(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = json.dumps(_answer(body["case_id"])).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _records(out):
    return {r["case_id"]: r for r in map(json.loads, (out / "records.jsonl").read_text()
                                         .splitlines())}


def test_http_system_fields_of_its_own_are_kept_with_one_warning(tiny, tmp_path):
    corpus, cases = tiny
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Adds)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    out = tmp_path / "run"
    try:
        proc = run_cli("run", *BASE, f"hydra.run.dir={out}", f"cache_dir={tmp_path / 'c'}",
                       f"dataset.corpus={corpus}", f"dataset.cases={cases}", "system=http",
                       f"system.url=http://127.0.0.1:{srv.server_address[1]}/",
                       "system.retries=0", cwd=tmp_path)
    finally:
        srv.shutdown()
        srv.server_close()
    assert proc.returncode == 0, proc.stderr
    recs = _records(out)
    t1 = recs["t-1"]
    assert t1["error"] is None
    assert t1["output"]["extra"] == {"trace_id": "tr-t-1"}
    assert t1["output"]["candidates"][0]["metadata"] == {"chunk_id": 7, "section": "Refunds"}
    assert t1["output"]["context"][0]["metadata"] == {"chunk_id": 7}
    assert t1["metrics"]["candidate.mrr"] == 1.0  # scored as any other hit
    assert recs["t-2"]["error"] is None
    assert "'chunk_id' is also in its 'metadata'" in recs["t-3"]["error"]
    assert "answer" in recs["t-4"]["error"] and "string" in recs["t-4"]["error"]
    warnings = [x for x in proc.stderr.splitlines() if "output contract does not name" in x]
    assert len(warnings) == 1, proc.stderr
    assert "candidates[].chunk_id" in warnings[0] and "trace_id" in warnings[0]
    assert "candidates[].section" in warnings[0] and "context[].chunk_id" in warnings[0]


def test_replay_files_with_fields_of_their_own_are_scored(tiny, tmp_path):
    corpus, cases = tiny
    lines = [{"case_id": c, **_answer(c)} for c in ("t-1", "t-2")]
    lines.append({"case_id": "t-4", "answer": "The PAY-ONCALL rota.", "candidates": []})
    replay = write_jsonl(tmp_path / "outputs.jsonl", lines)
    out = tmp_path / "run"
    proc = run_cli("run", *BASE, f"hydra.run.dir={out}", f"cache_dir={tmp_path / 'c'}",
                   f"dataset.corpus={corpus}", f"dataset.cases={cases}", "system=replay",
                   f"system.path={replay}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    recs = _records(out)
    assert recs["t-1"]["output"]["extra"] == {"trace_id": "tr-t-1"}
    assert recs["t-2"]["output"]["candidates"][0]["metadata"]["chunk_id"] == 7
    assert "extra" not in recs["t-4"]["output"]  # outputs without added fields: as before
    assert "candidates[].chunk_id" in proc.stderr and "trace_id" in proc.stderr


def test_a_replay_line_that_contradicts_itself_is_one_line(tiny, tmp_path):
    corpus, cases = tiny
    replay = write_jsonl(tmp_path / "outputs.jsonl", [{"case_id": "t-3", **_answer("t-3")}])
    proc = run_cli("run", *BASE, f"hydra.run.dir={tmp_path / 'run'}", f"dataset.corpus={corpus}",
                   f"dataset.cases={cases}", "system=replay", f"system.path={replay}",
                   cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "outputs.jsonl:1" in proc.stderr and "'chunk_id' is also in its" in proc.stderr


def test_accept_output_keeps_added_fields_and_the_strict_path_is_unchanged():
    plain = {"case_id": "c", "candidates": [{"doc_id": "d"}]}
    out, added = accept_output(plain)
    assert added == [] and out.model_dump() == SystemOutput.model_validate(plain).model_dump()
    assert "extra" not in out.model_dump()
    out, added = accept_output({"case_id": "c", "request_id": 3, "extra": {"a": 1},
                                "candidates": [{"doc_id": "d", "metadata": {"x": 1}, "y": 2}]})
    assert added == ["candidates[].y", "request_id"]
    assert out.extra == {"a": 1, "request_id": 3}
    assert out.candidates[0].metadata == {"x": 1, "y": 2}
    with pytest.raises(ContractError, match="'a' is also in its 'extra'"):
        accept_output({"case_id": "c", "a": 2, "extra": {"a": 1}})
    with pytest.raises(ContractError, match="'metadata' must be an object"):
        accept_output({"case_id": "c", "candidates": [{"doc_id": "d", "metadata": 3, "y": 1}]})


PY_SYSTEM = '''
from tests.systems.test_added_fields import _answer

def make(options):
    class Adds:
        def answer(self, request):
            return _answer(request.case_id)
    return Adds()
'''


def test_python_system_fields_of_its_own_are_kept_as_http_keeps_them(tiny, tmp_path):
    """Issue 32 item 4: a dict a python system returns is read as an http body is: added
    fields kept with one warning; a named field with a wrong value is one line naming the
    field and the case, not a pydantic dump."""
    import os
    from pathlib import Path

    corpus, cases = tiny
    (tmp_path / "adds_fields.py").write_text(PY_SYSTEM, encoding="utf-8")
    out = tmp_path / "run"
    root = str(Path(__file__).resolve().parents[2])
    proc = run_cli("run", *BASE, f"hydra.run.dir={out}", f"cache_dir={tmp_path / 'c'}",
                   f"dataset.corpus={corpus}", f"dataset.cases={cases}", "system=python",
                   "system._target_=adds_fields.make", cwd=tmp_path,
                   env={"PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0, proc.stderr
    recs = _records(out)
    t1 = recs["t-1"]
    assert t1["error"] is None
    assert t1["output"]["extra"] == {"trace_id": "tr-t-1"}
    assert t1["output"]["candidates"][0]["metadata"] == {"chunk_id": 7, "section": "Refunds"}
    assert t1["metrics"]["candidate.mrr"] == 1.0
    assert "'chunk_id' is also in its 'metadata'" in recs["t-3"]["error"]
    err = recs["t-4"]["error"]
    assert "case 't-4'" in err and "field 'answer'" in err and "string" in err
    assert "validation error" not in err and "pydantic" not in err and "\n" not in err
    warnings = [x for x in proc.stderr.splitlines() if "output contract does not name" in x]
    assert len(warnings) == 1, proc.stderr
    assert "candidates[].chunk_id" in warnings[0] and "trace_id" in warnings[0]
