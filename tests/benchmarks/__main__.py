"""Run the benchmarks, each printing its figures next to its target.

    python -m tests.benchmarks                 # all of them, default sizes
    python -m tests.benchmarks replay          # one of them
    python -m tests.benchmarks replay --repeat 5   # one, with its options
    python -m tests.benchmarks --list

Each benchmark measures ratios side by side in the same run; the machine's load is printed
with each figure. They are not part of the test run (``pytest`` collects no file here).
"""

from __future__ import annotations

import importlib
import inspect
import sys
import time

BENCHMARKS = {
    "replay": ("bench_replay", "1. replay scoring vs a pytrec_eval process: marginal CPU "
               "per case (and by stage), and whole process"),
    "grader_calls": ("bench_grader_calls", "2. Claude grader calls per case (batched, demo)"),
    "throughput": ("bench_throughput", "3. grader throughput at 200 ms per request"),
    "sweep": ("bench_sweep", "4. sweep reuse: 3 chunk sizes x 4 k vs the largest-k runs"),
    "mlflow": ("bench_mlflow", "5. 5,000 slice metrics to a sqlite MLflow store"),
    "startup": ("bench_startup", "6. start-up of raglab --help and validate --help"),
    "scale": ("bench_scale", "7. memory and scale, 2,000 vs 20,000 cases"),
    "compare": ("bench_compare", "8. raglab compare of two 20,000-case runs"),
    "memory": ("bench_memory", "9. peak memory of resume, compare, cases from-run vs the run"),
    "traces": ("bench_traces", "10. each case an MLflow trace: CPU per case, 200 ms grader, "
               "traces=failed at 20,000 cases"),
    "traces_in": ("bench_traces_in", "11. traces in: 100,000 OTLP JSON traces read vs "
                  "json.loads; peak memory at 20 and 200 MB"),
    "retrieval": ("bench_retrieval", "in-process scoring vs pytrec_eval, 10,000 x 100"),
    "stats": ("bench_stats", "paired statistics tables"),
    "regimes": ("bench_regimes", "paired statistics where few cases change: coverage, "
                "non-inferiority, power (docs/statistics.md)"),
    "family": ("bench_family", "the sweep-wide family (every pair of jobs): family-wise "
               "error on null sweeps of 6 jobs, and its time at 12 jobs x 300 cases"),
    "decisions": ("bench_decisions", "error rates of the gate checks: GO at a breach of the "
                  "margin, NO-GO with nothing changed (docs/statistics.md)"),
}


def run(name: str, args: list[str]) -> None:
    module = importlib.import_module(f"tests.benchmarks.{BENCHMARKS[name][0]}")
    saved = sys.argv
    sys.argv = [f"python -m tests.benchmarks {name}", *args]
    try:
        main = module.main
        if inspect.signature(main).parameters:
            main(args)
        else:  # a benchmark whose main() reads sys.argv itself
            main()
    finally:
        sys.argv = saved


def compiled() -> None:
    """Byte-compile raglab first, as installing a package does, so that no benchmark times
    the compiling of a module a change left without its ``.pyc`` (an environment with
    ``PYTHONDONTWRITEBYTECODE`` set never writes one)."""
    import compileall

    from tests.benchmarks.common import ROOT

    compileall.compile_dir(str(ROOT / "raglab"), quiet=1)


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help", "--list"):
        print(__doc__)
        for name, (_, what) in BENCHMARKS.items():
            print(f"  {name:13} {what}")
        return 0
    compiled()
    if argv:
        if argv[0] not in BENCHMARKS:
            print(f"unknown benchmark {argv[0]!r} (one of: {', '.join(BENCHMARKS)})",
                  file=sys.stderr)
            return 2
        run(argv[0], argv[1:])
        return 0
    for name in BENCHMARKS:
        if name in ("retrieval", "stats"):
            continue  # in-process figures documented on their own; run them by name
        t0 = time.perf_counter()
        print(f"== {name}: {BENCHMARKS[name][1]}", flush=True)
        run(name, [])
        print(f"   ({time.perf_counter() - t0:.0f} s)\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
