"""Benchmark: grader throughput against a local Messages API server that answers each request
after ``--latency`` seconds: the wall time of grading ``--cases`` demo cases with the Claude
grader (batched) at ``--concurrency`` against the ideal (requests x latency / concurrency),
then the same grading again (an unchanged re-run makes no request).

    python -m tests.benchmarks throughput [--cases 60] [--latency 0.2] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks.common import ROOT, child_env, load, verdict
from tests.graders.fake_anthropic import TEST_KEY

TARGET = 1.15


def _cases(n: int):
    from raglab.data.schema import Case

    lines = (ROOT / "raglab/datasets/demo/cases.jsonl").read_text(encoding="utf-8").splitlines()
    cases = [Case.model_validate(json.loads(x)) for x in lines if x.strip()]
    return [c for c in cases if c.answerable][:n]


def _output(case) -> dict:
    ref = case.reference_answer or "No answer."
    return {"case_id": case.id, "answer": f"{ref} [1]",
            "context": [{"doc_id": "d", "text": f"{ref} More text about it."}],
            "citations": [{"sentence": 0, "context": [0]}]}


async def _grade_all(cases, cache_dir: Path, concurrency: int) -> dict:
    from raglab.cache import StageCache
    from raglab.config import MetricsCfg
    from raglab.graders.claude import ClaudeGraderCfg, load_prompts
    from raglab.graders.orchestrate import Grading
    from raglab.graders.spec import family_versions
    from raglab.llm.client import LLMClient
    from raglab.runner.components import build_grader
    from raglab.systems.base import WorkCounter

    cfg = ClaudeGraderCfg(name="claude", model="claude-bench",
                          prompts="pkg://raglab/graders/prompts", concurrency=concurrency)
    prompts = load_prompts(cfg.prompts)

    class Run:
        grader = cfg

    llm = LLMClient(timeout_s=30, max_retries=1, concurrency=concurrency,
                    cache=StageCache(cache_dir))
    in_slot: list[float] = []  # each request's time holding a slot (send to answer), ms
    via = llm._via_messages

    async def timed_via(req):
        msg, ms = await via(req)
        in_slot.append(ms)
        return msg, ms

    llm._via_messages = timed_via
    work = WorkCounter()
    grading = Grading(build_grader(Run(), prompts, llm), "claude",
                      family_versions(cfg, prompts, MetricsCfg()), StageCache(cache_dir), work)
    import anthropic  # noqa: F401  (imported at a run's first request: start-up, not throughput)

    t0, c0 = time.perf_counter(), time.process_time()
    await grading.prepare(cases)
    results = await asyncio.gather(*(grading.grade(c, _output(c)) for c in cases))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    await llm.aclose()
    errors = sum(1 for vs, _ in results for v in vs if v.get("error"))
    return {"wall": wall, "cpu": cpu, "in_slot_s": sum(in_slot) / 1000, "work": work.as_dict(), "errors": errors}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=8)
    a = ap.parse_args(argv)

    cases = _cases(a.cases)
    srv = subprocess.Popen([sys.executable, "-m", "tests.benchmarks.slow_server",
                            str(a.latency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True, env=child_env())

    def count() -> int:
        srv.stdin.write("count\n")
        srv.stdin.flush()
        return int(srv.stdout.readline())

    saved = {k: os.environ.get(k) for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
                                            "NO_PROXY", "no_proxy")}
    url = srv.stdout.readline().strip()
    with tempfile.TemporaryDirectory() as d:
        os.environ.update(ANTHROPIC_API_KEY=TEST_KEY, ANTHROPIC_BASE_URL=url,
                          NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        try:
            first = asyncio.run(_grade_all(cases, Path(d), a.concurrency))
            n = count()
            again = asyncio.run(_grade_all(cases, Path(d), a.concurrency))
            n_again = count() - n
        finally:
            srv.stdin.close()
            srv.wait(timeout=30)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    import resource

    server_cpu = sum(getattr(resource.getrusage(resource.RUSAGE_CHILDREN), f)
                     for f in ("ru_utime", "ru_stime"))
    ideal = n * a.latency / a.concurrency
    ratio = first["wall"] / ideal
    print(f"throughput: {len(cases)} cases, {n} requests, {a.latency * 1000:.0f} ms each, "
          f"concurrency {a.concurrency} ({load()})")
    print(f"  wall {first['wall']:.2f} s, ideal {ideal:.2f} s, ratio {ratio:.2f} "
          f"(target <= {TARGET:g}) [{verdict(ratio <= TARGET)}]; errors {first['errors']}")
    slot = first["in_slot_s"] / a.concurrency
    print(f"  measured: requests held their slots {1000 * first['in_slot_s'] / max(1, n):.0f} ms "
          f"on average (the server's answer time here); ideal at that latency {slot:.2f} s, "
          f"ratio {first['wall'] / slot:.2f}")
    print(f"  CPU: grading {first['cpu']:.2f} s ({1000 * first['cpu'] / n:.1f} ms per request), "
          f"server process {server_cpu:.2f} s in all")
    print(f"  unchanged re-run: {n_again} requests (target 0) [{verdict(n_again == 0)}], "
          f"{again['wall']:.2f} s")


if __name__ == "__main__":
    main()
