"""Benchmark: grader throughput against a local server that answers each request after
``--latency`` seconds (the Messages API for ``grader=claude``, Chat Completions for
``grader=openai``): the wall time of grading ``--cases`` demo cases with the model grader
(batched) at ``--concurrency`` against the ideal (requests x latency / concurrency), then
the same grading again (an unchanged re-run makes no request).

It prints the requests in flight at most (the client's slots and at the server) and splits
the ratio into where the slot-seconds went (:func:`slot_budget`): the latency itself, the
server's time over it, the client's time in a slot outside the server (its CPU, and waiting
for its event loop), and idle slots. The server runs in a process of its own
(``slow_server``), a thread per request.

    python -m tests.benchmarks throughput [--cases 60] [--latency 0.2] [--concurrency 8]
        [--backend anthropic|openai|both]
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
from tests.llm.backends import BACKENDS, Backend

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


async def _grade_all(cases, cache_dir: Path, concurrency: int, be: Backend) -> dict:
    from raglab import registry
    from raglab.cache import StageCache
    from raglab.config import MetricsCfg
    from raglab.graders.claude import load_prompts
    from raglab.graders.orchestrate import Grading
    from raglab.graders.spec import family_versions
    from raglab.llm.backends import backend_class
    from raglab.llm.client import LLMClient
    from raglab.runner.components import build_grader
    from raglab.systems.base import WorkCounter

    cfg = registry.entry("grader", be.grader).config(
        name=be.grader, model="bench-model", prompts="pkg://raglab/graders/prompts",
        concurrency=concurrency)
    prompts = load_prompts(cfg.prompts)

    class Run:
        grader = cfg

    llm = LLMClient(timeout_s=30, max_retries=1, concurrency=concurrency,
                    cache=StageCache(cache_dir))
    slots = _WatchedSlots(llm.slots())  # the client's request slots, made now to be watched
    llm._sem = slots
    work = WorkCounter()
    grading = Grading(build_grader(Run(), prompts, llm), be.grader,
                      family_versions(cfg, prompts, MetricsCfg()), StageCache(cache_dir), work)
    backend_class(be.name).preload()  # imported before a run's first request: start-up

    t0, c0 = time.monotonic(), time.process_time()
    grading.start(cases)  # as a run does: the cases wait only for the calls they need
    results = await asyncio.gather(*(grading.grade(c, _output(c)) for c in cases))
    t1, cpu = time.monotonic(), time.process_time() - c0
    await llm.aclose()
    errors = sum(1 for vs, _ in results for v in vs if v.get("error"))
    return {"t0": t0, "t1": t1, "wall": t1 - t0, "cpu": cpu, "slots": slots.uses,
            "work": work.as_dict(), "errors": errors}


class _WatchedSlots:
    """The client's semaphore, noting for each request when it asked for a slot, got it and
    gave it back (``time.monotonic``)."""

    def __init__(self, sem: asyncio.Semaphore):
        self.sem = sem
        self.uses: list[list[float]] = []
        self._open: dict[asyncio.Task, list[float]] = {}

    async def __aenter__(self) -> None:
        use = [time.monotonic()]
        await self.sem.acquire()
        use.append(time.monotonic())
        self._open[asyncio.current_task()] = use

    async def __aexit__(self, *exc: object) -> bool:
        self.sem.release()
        use = self._open.pop(asyncio.current_task())
        use.append(time.monotonic())
        self.uses.append(use)
        return False


def slot_budget(uses: list[list[float]], served: list[list[float]], t0: float, t1: float,
                concurrency: int, latency: float) -> dict[str, float]:
    """Where the ``concurrency x wall`` slot-seconds went, each as a share of the ideal
    (requests x latency): the latency itself (1.0 for each request), the server's time over
    it, the client's time in a slot outside the server, and idle slots while a request
    waited for one (the event loop busy elsewhere), before the last request was queued
    (nothing ready to send) and after it (the tail). The shares add up to the wall ratio."""
    n = len(uses)
    ideal = max(1e-9, n * latency)
    held = sum(r - a for _, a, r in uses)
    at_server = sum(e - b for b, e in served if e is not None)
    events = sorted([(a, 0, 1) for _, a, _ in uses] + [(r, 0, -1) for *_, r in uses]
                    + [(w, 1, 1) for w, _, _ in uses] + [(a, 1, -1) for _, a, _ in uses])
    last_queued = max((w for w, _, _ in uses), default=t0)
    idle_waiting = idle_ready = idle_tail = 0.0
    inflight = waiting = peak = 0
    t = t0
    for when, kind, step in [*events, (t1, 2, 0)]:
        dt, free = max(0.0, when - t), concurrency - inflight
        if waiting:
            idle_waiting += free * dt
        elif t < last_queued:
            idle_ready += free * dt
        else:
            idle_tail += free * dt
        t = max(t, when)
        if kind == 0:
            inflight += step
            peak = max(peak, inflight)
        elif kind == 1:
            waiting += step
    return {"latency": n * latency / ideal, "server_over": (at_server - n * latency) / ideal,
            "client_in_slot": (held - at_server) / ideal, "idle_waiting": idle_waiting / ideal,
            "idle_nothing_ready": idle_ready / ideal, "idle_tail": idle_tail / ideal,
            "peak_in_flight": peak, "held_ms": 1000 * held / max(1, n),
            "server_ms": 1000 * at_server / max(1, len(served))}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--backend", choices=["anthropic", "openai", "both"], default="both")
    a = ap.parse_args(argv)
    for be in BACKENDS:
        if a.backend in (be.name, "both"):
            _bench(be, a)


def _children_cpu() -> float:
    import resource

    return sum(getattr(resource.getrusage(resource.RUSAGE_CHILDREN), f)
               for f in ("ru_utime", "ru_stime"))


def _bench(be: Backend, a: argparse.Namespace) -> None:
    cases = _cases(a.cases)
    cpu_before = _children_cpu()
    srv = subprocess.Popen([sys.executable, "-m", "tests.benchmarks.slow_server",
                            str(a.latency), be.name], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True, env=child_env())

    def ask(cmd: str):
        srv.stdin.write(cmd + "\n")
        srv.stdin.flush()
        return json.loads(srv.stdout.readline())

    saved = {k: os.environ.get(k) for k in (be.key_var, be.url_var, "NO_PROXY", "no_proxy")}
    url = srv.stdout.readline().strip()
    with tempfile.TemporaryDirectory() as d:
        os.environ.update({be.key_var: be.key, be.url_var: url,
                           "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
        try:
            first = asyncio.run(_grade_all(cases, Path(d), a.concurrency, be))
            n = ask("count")
            served = ask("timeline")
            again = asyncio.run(_grade_all(cases, Path(d), a.concurrency, be))
            n_again = ask("count") - n
        finally:
            srv.stdin.close()
            srv.wait(timeout=30)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    server_cpu = _children_cpu() - cpu_before  # this benchmark's server process only
    ideal = n * a.latency / a.concurrency
    ratio = first["wall"] / ideal
    print(f"throughput, grader={be.grader}: {len(cases)} cases, {n} requests, "
          f"{a.latency * 1000:.0f} ms each, "
          f"concurrency {a.concurrency} ({load()})")
    print(f"  wall {first['wall']:.2f} s, ideal {ideal:.2f} s, ratio {ratio:.2f} "
          f"(target <= {TARGET:g}) [{verdict(ratio <= TARGET)}]; errors {first['errors']}")
    b = slot_budget(first["slots"], served["requests"], first["t0"], first["t1"],
                    a.concurrency, a.latency)
    print(f"  in flight at most: {b['peak_in_flight']} slots held by the client, "
          f"{served['peak']} requests at the server; a request held its slot "
          f"{b['held_ms']:.0f} ms on average, {b['server_ms']:.0f} ms of it at the server")
    print("  the ratio, split: latency {latency:.2f} + server over it {server_over:.3f} "
          "+ client in a slot {client_in_slot:.3f} + idle slots: request waiting "
          "{idle_waiting:.3f}, nothing ready {idle_nothing_ready:.3f}, tail {idle_tail:.3f}"
          .format(**b))
    print(f"  CPU: grading {first['cpu']:.2f} s ({1000 * first['cpu'] / n:.1f} ms per request), "
          f"server process {server_cpu:.2f} s in all")
    print(f"  unchanged re-run: {n_again} requests (target 0) [{verdict(n_again == 0)}], "
          f"{again['wall']:.2f} s")


if __name__ == "__main__":
    main()
