"""End-to-end runs through the adapters (real subprocesses, real HTTP server)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import run_cli, write_jsonl

BASE = ["tracking=none", "metrics.cutoffs=[1,3,5]", "k=3", "candidate_depth=5"]


def _run(tmp_path, *extra, name="run"):
    out = tmp_path / name
    proc = run_cli("run", *BASE, f"hydra.run.dir={out}", f"cache_dir={tmp_path / 'cache'}", *extra,
                   cwd=tmp_path)
    return proc, out


def _metrics(out):
    return json.loads((out / "metrics.json").read_text())


def _records(out):
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


REFUNDS = "Refunds are paid back to the original card within 5 business days."


def test_replay_known_answers(tiny, tmp_path):
    corpus, cases = tiny
    outputs = [
        {"case_id": "t-1",  # gold chunk at rank 2 of candidates, rank 1 of context
         "candidates": [{"doc_id": "kb/b", "text": ""},
                        {"doc_id": "kb/a", "text": REFUNDS}],
         "context": [{"doc_id": "kb/a", "text": REFUNDS}],
         "answer": "Refunds are paid back to the original card within 5 business days [1].",
         "citations": [{"sentence": 0, "context": [0]}],
         "latency_ms": {"retrieve": 10, "generate": 20}},
        {"case_id": "t-2", "candidates": [{"doc_id": "kb/a", "text": ""}], "context": [],
         "answer": "I don't know based on the available documents."},
        {"case_id": "t-3",  # leaks the staff-only document to a customer
         "candidates": [{"doc_id": "internal/c", "text": ""}], "context": [],
         "answer": "Escalate to the on-call lead via the PAY-ONCALL rota."},
        # t-4 missing: an error for that case, the run goes on
    ]
    replay = write_jsonl(tmp_path / "outputs.jsonl", outputs)
    proc, out = _run(tmp_path, f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                     "dataset.labels=null", "system=replay", f"system.path={replay}",
                     "grader=heuristic")
    assert proc.returncode == 0, proc.stderr
    m = _metrics(out)
    o = m["overall"]
    assert m["n_cases"] == 4 and m["errors"] == 1
    assert o["error_rate"] == 0.25
    # t-1: candidate mrr 1/2, t-2: 0 -> mean 0.25 over the two answerable cases with output
    assert o["candidate.mrr"] == pytest.approx(0.25)
    assert o["final.mrr"] == pytest.approx(0.5)
    assert o["candidate.evidence_recall@3"] == pytest.approx(0.5)
    assert o["candidate.precision@1"] == 0.0 and o["candidate.precision@3"] == pytest.approx(1 / 6)
    assert o["acl_leak_rate"] == pytest.approx(1 / 3)
    assert o["false_refusal_rate"] == pytest.approx(0.5)  # t-2 refused, t-1 answered
    assert o["false_answer_rate"] == 1.0  # t-3 answered an unanswerable case
    assert o["faithfulness"] == pytest.approx(0.5)  # t-3 answered with no context: NOT_FOUND
    assert o["citation_precision"] == 1.0
    recs = {r["case_id"]: r for r in _records(out)}
    assert recs["t-4"]["error"].startswith("system: LookupError")
    assert recs["t-3"]["severity_one"][0]["doc_id"] == "internal/c"
    assert m["slices"]["answerable"]["no"]["false_answer_rate"] == 1.0
    assert set(m["metric_versions"]) == {"retrieval", "faithfulness", "citations", "correctness",
                                         "relevance", "nuggets", "abstention", "diagnosis"}
    assert {c: r["diagnosis"] and r["diagnosis"]["causes"] for c, r in recs.items()} == {
        "t-1": None,  # evidence in the context, a faithful and correct answer: passed
        "t-2": ["retrieval", "false_refusal"],
        "t-3": ["hallucinated_answer", "generation", "access_control"],
        "t-4": ["error"]}
    assert (out / "config.yaml").exists()


def test_reference_pipeline_acl_enforced_and_leaky(tiny, tmp_path):
    corpus, cases = tiny
    common = [f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null",
              "chunker=sentence", "chunker.size=2", "chunker.overlap=0"]
    proc, safe = _run(tmp_path, *common, "system.enforce_acl=true", name="safe")
    assert proc.returncode == 0, proc.stderr
    proc, leaky = _run(tmp_path, *common, "system.enforce_acl=false", name="leaky")
    assert proc.returncode == 0, proc.stderr
    assert _metrics(safe)["overall"]["acl_leak_rate"] == 0.0
    leak = _metrics(leaky)["overall"]["acl_leak_rate"]
    assert leak > 0
    flagged = [r for r in _records(leaky) if r.get("severity_one")]
    assert {r["case_id"] for r in flagged} >= {"t-3"}
    o = _metrics(safe)["overall"]
    for k in ("candidate.evidence_recall@3", "final.ndcg@3", "final.mrr", "final.context_tokens",
              "final.first_gold_rank", "final.context_precision", "faithfulness",
              "vital_nugget_recall", "false_refusal_rate", "false_answer_rate"):
        assert o[k] is not None, k
    assert "final.ndcg@5" not in o  # cutoffs above k are not reported at the final stage
    assert "candidate.ndcg@5" in o


def test_demo_reference_run_fills_every_metric(tmp_path):
    proc = run_cli("run", "tracking=none", f"hydra.run.dir={tmp_path / 'demo'}",
                   f"cache_dir={tmp_path / 'cache'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    m = _metrics(tmp_path / "demo")
    o = m["overall"]
    for k in ("candidate.evidence_recall@50", "final.evidence_recall@5", "candidate.mrr",
              "final.ndcg", "final.all_evidence@5", "final.hit_rate@1", "final.precision@5",
              "final.context_precision", "final.first_gold_rank", "final.context_tokens",
              "acl_leak_rate", "faithfulness", "contradicted_claim_rate", "citation_precision",
              "citation_coverage", "correctness", "relevance", "vital_nugget_recall",
              "nugget_recall", "all_vital_present", "false_refusal_rate", "false_answer_rate",
              "must_not_contain_rate", "latency_ms.retrieve", "cost_usd_per_query", "error_rate"):
        assert o[k] is not None, k
    assert m["n_quarantined"] == 0 and m["errors"] == 0
    assert m["work"]["index_builds"] == 1
    assert o["must_not_contain_rate"] > 0  # the planted injections reach some answers
    assert o["acl_leak_rate"] == 0.0
    assert "raglab run:" in proc.stdout
    # the same pipeline without ACL enforcement leaks restricted documents on the demo
    leaky = tmp_path / "leaky"
    proc = run_cli("run", "tracking=none", "grader=none", "system.enforce_acl=false",
                   f"hydra.run.dir={leaky}", f"cache_dir={tmp_path / 'cache'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _metrics(leaky)["overall"]["acl_leak_rate"] > 0.05
    assert _metrics(leaky)["work"]["index_builds"] == 0  # same index, from the cache


class _Handler(BaseHTTPRequestHandler):
    calls: dict = {}

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cid = body["case_id"]
        n = _Handler.calls[cid] = _Handler.calls.get(cid, 0) + 1
        assert body["config"]["k"] == 3 and "chunker" in body["config"]
        assert self.headers["Authorization"] == "Bearer s3cret-token"
        if cid == "t-1" and n == 1:
            return self._send(503, b"busy")  # retried
        if cid == "t-2":
            return self._send(200, b"{not json")  # malformed: that case errors
        if cid == "t-3":
            return self._send(422, b'{"detail": "nope"}')  # 4xx: not retried
        out = {"candidates": [{"doc_id": "kb/a", "text": ""}], "context": [],
               "answer": "Within 5 business days."}
        self._send(200, json.dumps(out).encode())

    def _send(self, code, data):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_http_adapter_against_a_real_server(tiny, tmp_path):
    corpus, cases = tiny
    _Handler.calls = {}
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        proc, out = _run(tmp_path, f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                         "dataset.labels=null", "system=http",
                         f"system.url=http://127.0.0.1:{srv.server_address[1]}/answer",
                         "system.backoff_s=0.01", "grader=none",
                         "+system.headers.Authorization=Bearer s3cret-token")
    finally:
        srv.shutdown()
    assert proc.returncode == 0, proc.stderr
    recs = {r["case_id"]: r for r in _records(out)}
    assert _Handler.calls["t-1"] == 2 and recs["t-1"]["error"] is None
    assert "malformed JSON" in recs["t-2"]["error"]
    assert "HTTP 422" in recs["t-3"]["error"] and _Handler.calls["t-3"] == 1
    assert recs["t-4"]["error"] is None
    assert _metrics(out)["errors"] == 2
    for f in out.rglob("*"):  # the secret header reached the server but is stored nowhere
        if f.is_file():
            assert b"s3cret-token" not in f.read_bytes(), f
    saved = (out / "config.yaml").read_text()
    assert "Authorization: '***'" in saved
    assert "context_token_budget: 1500" in saved  # ordinary settings are not redacted


def test_http_adapter_connection_refused_is_a_case_error(tiny, tmp_path):
    import socket
    corpus, cases = tiny
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc, out = _run(tmp_path, f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                     "dataset.labels=null", "system=http", f"system.url=http://127.0.0.1:{port}/",
                     "system.retries=1", "system.backoff_s=0.01", "grader=none")
    # every case failed: the run directory is complete, but the run exits 1 (issue 10)
    assert proc.returncode == 1, proc.stderr
    assert "4 of 4 cases failed" in proc.stderr
    assert _metrics(out)["errors"] == 4
    assert all("ConnectionError" in r["error"] for r in _records(out))


PLUGIN = '''
from raglab.data.schema import SystemOutput

class Sys:
    def __init__(self, opts):
        self.opts = opts
    def answer(self, request):
        if request.case_id == "t-2":
            raise RuntimeError("model crashed")
        if request.case_id == "t-3":
            return {"case_id": "t-3", "candidates": "not a list"}
        return SystemOutput(case_id=request.case_id,
                            candidates=[{"doc_id": "kb/a", "text": ""}],
                            answer=self.opts["answer"])

def make(opts):
    return Sys(opts)
'''


def test_python_adapter_and_failures_per_case(tiny, tmp_path):
    corpus, cases = tiny
    (tmp_path / "myplugin.py").write_text(PLUGIN)
    out = tmp_path / "py"
    proc = run_cli("run", *BASE, f"hydra.run.dir={out}", f"cache_dir={tmp_path / 'c'}",
                   f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null",
                   "system=python", "system._target_=myplugin.make",
                   "+system.options.answer=Refunds take 5 business days.", "grader=none",
                   cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    recs = {r["case_id"]: r for r in _records(out)}
    assert "RuntimeError: model crashed" in recs["t-2"]["error"]
    # one line naming the case and the field, not a pydantic dump
    assert "output of case 't-3' does not fit the output contract: field 'candidates'" \
        in recs["t-3"]["error"]
    assert recs["t-1"]["metrics"]["candidate.mrr"] == 1.0
    assert _metrics(out)["overall"]["error_rate"] == 0.5


@pytest.mark.parametrize("override,needle", [
    ("chunker=nonsense", "chunker"),
    ("k=60", "k (60) must not exceed candidate_depth (50)"),
    ("chunker.size=-3", "config chunker.size"),
    ("system=replay", "system.path"),
    ("system=replay system.path=/nonexistent/outputs.jsonl", "replay file not found"),
    ("chunker.sise=3", "sise"),
    ("system=http system.url=localhost:8080", "must start with http:// or https://"),
])
def test_bad_configuration_fails_before_any_work(tmp_path, override, needle):
    out = tmp_path / "bad"
    proc = run_cli("run", "tracking=none", f"hydra.run.dir={out}", *override.split(),
                   cwd=tmp_path)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert needle in proc.stderr, proc.stderr
    assert not (out / "records.jsonl").exists()
