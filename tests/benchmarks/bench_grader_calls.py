"""Benchmark: grader calls per case with a model grader (``verification: batched``) on the
demo set, against the local fake server of its backend (the Messages API for
``grader=claude``, Chat Completions for ``grader=openai``); then the same run again (an
unchanged re-run must make no call).

    python -m tests.benchmarks grader_calls [--cases N] [--src TREE] [--backend B]

``--backend``: ``anthropic``, ``openai`` or ``both`` (the default).

``--cases N`` takes a subset of the demo (answerable and unanswerable cases in the demo's
proportion); ``--src`` runs another source tree (for example an export of an older commit) to
count its calls the same way.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.graders.fake_anthropic import fake_model
from tests.llm.backends import BACKENDS, Backend

TARGET = 3.0
DEMO = Path(__file__).resolve().parents[2] / "raglab" / "datasets" / "demo" / "cases.jsonl"


def subset(out: Path, n: int | None) -> Path:
    cases = [json.loads(x) for x in DEMO.read_text(encoding="utf-8").splitlines() if x.strip()]
    if n is not None and n < len(cases):
        ans = [c for c in cases if c["answerable"]]
        una = [c for c in cases if not c["answerable"]]
        k = round(n * len(ans) / len(cases))
        cases = ans[:k] + una[:n - k]
    out.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return out


def env_for(be: Backend, srv, src: Path) -> dict[str, str]:
    return {**be.env(srv), "PYTHONPATH": str(src)}


def run(tmp: Path, name: str, env: dict[str, str], cases: Path, *extra: str,
        grader: str = "claude") -> dict:
    cmd = [sys.executable, "-m", "raglab.cli", "run", f"grader={grader}", "tracking=none",
           f"hydra.run.dir={tmp / name}", f"cache_dir={tmp / 'cache'}",
           f"dataset.cases={cases}", "progress=off", *extra]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
    if p.returncode != 0:
        raise SystemExit(p.stderr[-2000:])
    m = json.loads((tmp / name / "metrics.json").read_text(encoding="utf-8"))
    return {"seconds": time.perf_counter() - t0, "metrics": m}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=None)
    ap.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[2])
    ap.add_argument("--dump", type=Path, default=None, help=(
        "write the run's scores here (with both backends: NAME-BACKEND.json)"))
    ap.add_argument("--backend", choices=["anthropic", "openai", "both"], default="both")
    a = ap.parse_args(argv)
    for be in BACKENDS:
        if a.backend in (be.name, "both"):
            _bench(be, a)


def _bench(be: Backend, a: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as d, be.server(handler=fake_model) as srv:
        tmp = Path(d)
        cases = subset(tmp / "cases.jsonl", a.cases)
        n = sum(1 for x in cases.read_text().splitlines() if x.strip())
        env = env_for(be, srv, a.src)
        first = run(tmp, "run1", env, cases, grader=be.grader)
        calls = len(be.requests(srv))
        second = run(tmp, "run2", env, cases, grader=be.grader)
        again = len(be.requests(srv)) - calls
        per_case = calls / n
        print(f"grader calls, grader={be.grader} (batched), {n} demo cases: {calls} requests, "
              f"{per_case:.2f} per case (target <= {TARGET:g}) "
              f"[{'met' if per_case <= TARGET else 'NOT met'}]; {first['seconds']:.1f} s")
        print(f"unchanged re-run: {again} requests (target 0) "
              f"[{'met' if again == 0 else 'NOT met'}]; {second['seconds']:.1f} s; "
              f"work {json.dumps(second['metrics']['work'])}")
        same = _scores(first["metrics"]) == _scores(second["metrics"])
        print(f"re-run scores identical (latency aside): {same}")
        if a.dump:
            out = a.dump if a.backend != "both" else \
                a.dump.with_name(f"{a.dump.stem}-{be.name}{a.dump.suffix}")
            out.write_text(json.dumps(_scores(first["metrics"]), indent=1), encoding="utf-8")


def _scores(m: dict) -> dict:
    return {k: v for k, v in m["overall"].items() if not k.startswith("latency_ms.")}


if __name__ == "__main__":
    main()
