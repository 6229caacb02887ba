"""Benchmark: whole-process replay scoring against a bare pytrec_eval process.

``raglab run system=replay grader=none tracking=none`` on a synthetic set (records,
metrics.json and report.md written; one process, its configuration composed with Hydra)
against a Python process that parses the same three files with ``json`` and scores the
rankings with pytrec_eval (``tests/benchmarks/trec_baseline.py``). The two run interleaved,
``--repeat`` pairs, each raglab run into its own run directory; the target is on CPU time
(user + system, the work done whatever the machine's load): the median of the side-by-side
ratios (each raglab run against the pytrec_eval run beside it, since the machine's speed
drifts) is printed next to it, the wall-time ratio beside it without a target.

``--floor`` also times, in each pair's turn, the two processes of
``tests/benchmarks/replay_floor.py``: the Hydra start-up and composition every run goes
through, and one validation per replayed line with the records' output written back. Their
sum is the least CPU any replay run can take under the design's rules (one composition by
Hydra, one parse per line by the one output schema, records that hold the output), and its
ratio to the pytrec_eval process the least ratio the target can be met with.

    python -m tests.benchmarks replay [--cases 2000] [--depth 100] [--repeat 5] [--floor]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

from tests.benchmarks.common import load, python, timed_process, verdict
from tests.benchmarks.replay_data import make

TARGET_CPU = 2.5  # raglab's CPU time over the pytrec_eval process's, at most


def raglab_cmd(paths: dict[str, Path], run_dir: Path, cache: Path) -> list[str]:
    return [python(), "-m", "raglab.cli", "run", "system=replay",
            f"system.path={paths['outputs']}", f"dataset.corpus={paths['corpus']}",
            f"dataset.cases={paths['cases']}", "dataset.labels=null", "grader=none",
            "tracking=none", f"hydra.run.dir={run_dir}", f"cache_dir={cache}", "progress=off"]


def trec_cmd(paths: dict[str, Path], out: Path) -> list[str]:
    return [python(), "-m", "tests.benchmarks.trec_baseline", str(paths["corpus"]),
            str(paths["cases"]), str(paths["outputs"]), str(out)]


def floor_cmds(paths: dict[str, Path], run_dir: Path, tmp: Path) -> list[list[str]]:
    """The two processes of replay_floor: Hydra with the run's overrides, the outputs."""
    overrides = raglab_cmd(paths, run_dir, tmp / "cache")[4:]
    module = [python(), "-m", "tests.benchmarks.replay_floor"]
    return [[*module, "hydra", *overrides],
            [*module, "outputs", str(paths["outputs"]), str(tmp / "floor.jsonl")]]


def measure(n_cases: int, depth: int, repeat: int, slices: int = 50,
            floor: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        paths = make(tmp / "data", n_cases, depth, slices)
        rag, trec, least = [], [], []
        for i in range(repeat):
            run_dir = tmp / f"run{i}"
            rag.append(timed_process(raglab_cmd(paths, run_dir, tmp / "cache")))
            trec.append(timed_process(trec_cmd(paths, tmp / "trec.json")))
            for f in ("records.jsonl", "metrics.json", "report.md"):
                assert (run_dir / f).is_file(), f
            shutil.rmtree(run_dir)
            if floor:
                parts = [timed_process(cmd) for cmd in floor_cmds(paths, tmp / "floor", tmp)]
                least.append({k: sum(p[k] for p in parts) for k in ("cpu", "wall")}
                             | {"hydra": parts[0]["cpu"], "outputs": parts[1]["cpu"]})
        return {"raglab": rag, "trec": trec, "floor": least}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--floor", action="store_true",
                    help="also time the least work any replay run must do (replay_floor)")
    a = ap.parse_args(argv)
    print(f"replay: {a.cases} cases x {a.depth} candidates, grader=none, one raglab process "
          f"against the pytrec_eval process, {a.repeat} interleaved pairs ({load()})")
    r = measure(a.cases, a.depth, a.repeat, floor=a.floor)
    for what in ("cpu", "wall"):
        rag = statistics.median(x[what] for x in r["raglab"])
        trec = statistics.median(x[what] for x in r["trec"])
        pairs = sorted(x[what] / y[what] for x, y in zip(r["raglab"], r["trec"]))
        ratio = statistics.median(pairs)
        judged = (f"target: at most {TARGET_CPU:g}x [{verdict(ratio <= TARGET_CPU)}]"
                  if what == "cpu" else "no target")
        print(f"  {what:4}: raglab {rag:.2f} s, pytrec_eval process {trec:.2f} s (medians); "
              f"ratio {ratio:.2f}x (median of {len(pairs)} side-by-side ratios, "
              f"{pairs[0]:.2f} to {pairs[-1]:.2f}); {judged}")
    print(f"  peak RSS: raglab {max(x['rss_mib'] for x in r['raglab']):.0f} MiB")
    if r["floor"]:
        ratio = statistics.median(x["cpu"] / y["cpu"] for x, y in zip(r["floor"], r["trec"]))
        hydra = statistics.median(x["hydra"] for x in r["floor"])
        outputs = statistics.median(x["outputs"] for x in r["floor"])
        print(f"  floor: Hydra start-up and composition {hydra:.2f} s CPU + one validation "
              f"per line with the outputs written back {outputs:.2f} s = {hydra + outputs:.2f} "
              f"s; {ratio:.2f}x the pytrec_eval process (median of side-by-side ratios), "
              f"before any scoring: the least ratio any replay run can reach")


if __name__ == "__main__":
    main()
