"""Throwaway services for integration tests, and a synthetic run directory.

- ``postgres_server(tmp_path)``: a PostgreSQL cluster (initdb + pg_ctl) on a free 127.0.0.1
  port with its unix socket in a private temp dir; yields a SQLAlchemy URI
  ``postgresql+psycopg://raglab@127.0.0.1:PORT/mlflow``. initdb refuses to run as root, so
  as root the cluster runs as the ``postgres`` user when it exists, else ``nobody``.
- ``mlflow_server(backend_uri, tmp_path)``: ``mlflow server`` on a free port with proxied
  artifacts in ``tmp_path/artifacts``; yields ``http://127.0.0.1:PORT``.
- ``make_run_dir(path)``: a run directory as raglab writes it (config.yaml, metrics.json with
  about 1,550 metrics incl. hostile slice values, records.jsonl, quarantine.jsonl);
  ``expected_metrics(run_dir)``: the MLflow metrics it must produce, computed from the rules;
  ``artifact_paths(client, run_id)``: every artifact file of a run.

Every wait is bounded; every process started here is stopped by its own id.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from raglab.tracking.keys import metric_key, slice_metric_key

CUTOFFS = [1, 3, 5, 10, 20, 50, 100]
HOSTILE_VALUES = ["a/b", "a_s_b", "x__y", "é ü", "50%", "", ".", "..", "billing"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- synthetic run dir ---------------------------------------------------------------------
def _metric_names(k: int = 5, depth: int = 100) -> list[str]:
    names = []
    for stage, limit in (("candidate", depth), ("final", k)):
        for fam in ("evidence_recall", "all_evidence", "hit_rate", "precision", "ndcg"):
            names += [f"{stage}.{fam}@{c}" for c in CUTOFFS if c <= limit] + [f"{stage}.{fam}"]
        names.append(f"{stage}.mrr")
    names += ["final.context_precision", "final.first_gold_rank", "final.context_tokens",
              "acl_leak_rate", "faithfulness", "contradicted_claim_rate", "citation_precision",
              "citation_coverage", "correctness", "relevance", "vital_nugget_recall",
              "nugget_recall", "all_vital_present", "false_refusal_rate", "false_answer_rate",
              "must_not_contain_rate", "latency_ms.retrieve", "latency_ms.generate",
              "cost_usd_per_query", "error_rate"]
    return names


def _values(names: list[str], seed: int) -> dict:
    out = {}
    for i, name in enumerate(names):
        if name in ("correctness", "relevance"):
            out[name] = None  # grader without these: null, never NaN
        else:
            out[name] = round(((i * 37 + seed * 11) % 97) / 97, 4)
    return out


def make_run_dir(path: Path, *, seed: int = 0, n_intents: int = 14,
                 dataset: str = "demo") -> Path:
    """Write a synthetic finished run directory into ``path`` and return it."""
    path.mkdir(parents=True, exist_ok=True)
    cfg = {"dataset": {"name": dataset, "cases": str(path / "cases.jsonl")}, "k": 5,
           "candidate_depth": 100, "chunker": {"name": "fixed", "size": 128},
           "metrics": {"cutoffs": CUTOFFS}, "run_name": f"synthetic-{seed}",
           "grader": {"name": "claude", "api_key": "sk-SECRET", "model": "m"}}
    (path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    (path / "cases.jsonl").write_text('{"id": "c1", "question": "q"}\n', encoding="utf-8")
    names = _metric_names()
    intents = (HOSTILE_VALUES + [f"intent-{i}" for i in range(n_intents)])[:n_intents]
    slices = {
        "intent": {v: {"n": 3 + i, **_values(names, seed + i)} for i, v in enumerate(intents)},
        "source/kind": {"kb": {"n": 10, **_values(names, seed + 50)},
                        "tickets": {"n": 4, **_values(names, seed + 51)}},
        "answerable": {"true": {"n": 12, **_values(names, seed + 60)},
                       "false": {"n": 2, **_values(names, seed + 61)}},
    }
    metrics = {
        "overall": _values(names, seed),
        "slices": slices,
        "metric_versions": {f: f"{f[:3]}{seed:04d}" for f in (
            "retrieval", "faithfulness", "citations", "correctness", "relevance", "nuggets",
            "abstention")},
        "n_cases": 14, "n_quarantined": 1, "errors": 0,
        "work": {"index_builds": 1, "retrievals": 14, "generations": 14, "grader_calls": 30,
                 "grader_cache_hits": 0},
    }
    (path / "metrics.json").write_text(json.dumps(metrics, indent=1), encoding="utf-8")
    with open(path / "records.jsonl", "w", encoding="utf-8") as fh:
        for i in range(3):
            fh.write(json.dumps({"case_id": f"c{i}", "tags": {"intent": "billing"},
                                 "output": {"answer": "x"}, "verdicts": [],
                                 "metrics": {"faithfulness": 1.0}, "error": None}) + "\n")
    (path / "quarantine.jsonl").write_text(
        json.dumps({"case_id": "c9", "file": "cases.jsonl", "line": 9,
                    "reason": "gold quote not found"}) + "\n", encoding="utf-8")
    return path


def expected_metrics(run_dir: Path) -> dict[str, float]:
    """Computed independently of metrics_from_summary, from the documented rules."""
    m = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    out = {metric_key(k): v for k, v in m["overall"].items() if v is not None}
    for tk, values in m["slices"].items():
        for tv, mets in values.items():
            out.update({slice_metric_key(tk, tv, k): v for k, v in mets.items() if v is not None})
    out.update({k: m[k] for k in ("n_cases", "n_quarantined", "errors")})
    out.update({f"work.{k}": v for k, v in m["work"].items()})
    return {k: float(v) for k, v in out.items()}


def artifact_paths(client, run_id: str, path: str | None = None) -> set[str]:
    out = set()
    for item in client.list_artifacts(run_id, path):
        out |= artifact_paths(client, run_id, item.path) if item.is_dir else {item.path}
    return out


# ---- PostgreSQL ----------------------------------------------------------------------------
def _pg_user() -> pwd.struct_passwd | None:
    """The unprivileged account to run PostgreSQL as (None: the current user is fine)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("running as root and no 'postgres' or 'nobody' user to run PostgreSQL")


def _run_as(cmd: list[str], user: pwd.struct_passwd | None, cwd: Path, timeout: float,
            log: Path | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C",
           "HOME": str(cwd), "TZ": "UTC"}
    kwargs: dict = {}
    if user is not None:
        kwargs = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=timeout, **kwargs)
    if out.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
        raise RuntimeError(f"{cmd[0]} failed ({out.returncode}): {out.stderr[-2000:]} {tail}")
    return out


@contextlib.contextmanager
def postgres_server(tmp_path: Path) -> Iterator[str]:
    """A throwaway PostgreSQL; yields ``postgresql+psycopg://raglab@127.0.0.1:PORT/mlflow``."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if not initdb or not pg_ctl:
        raise FileNotFoundError("initdb/pg_ctl not on PATH")
    user = _pg_user()
    # tmp_path may sit under a root-only directory: the cluster lives in its own temp dir
    base = Path(tempfile.mkdtemp(prefix="raglab-pg-"))
    data, sock, log = base / "data", base / "sock", base / "postgres.log"
    sock.mkdir()
    if user is not None:
        for p in (base, sock):
            os.chown(p, user.pw_uid, user.pw_gid)
    port = free_port()
    started = False
    try:
        _run_as([initdb, "-D", str(data), "-U", "raglab", "--auth=trust", "-E", "UTF8",
                 "--locale=C", "--no-sync"], user, base, timeout=120)
        opts = (f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=60 "
                "-c shared_buffers=32MB")
        _run_as([pg_ctl, "-D", str(data), "-l", str(log), "-o", opts, "-w", "-t", "60",
                 "start"], user, base, timeout=90, log=log)
        started = True
        import psycopg
        with psycopg.connect(host="127.0.0.1", port=port, user="raglab", dbname="postgres",
                             autocommit=True, connect_timeout=10) as conn:
            conn.execute("CREATE DATABASE mlflow")
        (tmp_path / "postgres.port").write_text(str(port))
        yield f"postgresql+psycopg://raglab@127.0.0.1:{port}/mlflow"
    finally:
        if started:
            with contextlib.suppress(Exception):
                _run_as([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "-t", "30", "stop"],
                        user, base, timeout=45)
        shutil.rmtree(base, ignore_errors=True)


# ---- mlflow server -------------------------------------------------------------------------
def _stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)  # the server's own session (start_new_session)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextlib.contextmanager
def mlflow_server(backend_uri: str, tmp_path: Path, timeout: float = 120) -> Iterator[str]:
    """``mlflow server`` on a free port (1 worker, proxied artifacts); yields its http URI."""
    import requests

    port = free_port()
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    log_path = tmp_path / "mlflow-server.log"
    env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true")
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_uri,
           "--host", "127.0.0.1", "--port", str(port), "--artifacts-destination",
           str(artifacts), "--workers", "1"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=tmp_path, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited ({proc.returncode}): "
                                   f"{log_path.read_text(errors='replace')[-3000:]}")
            try:
                if requests.get(f"{uri}/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server not healthy after {timeout:g} s: "
                                   f"{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        yield uri
    finally:
        _stop(proc)
