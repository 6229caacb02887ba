"""Benchmark: whole-process replay scoring against a bare pytrec_eval process.

``raglab run system=replay grader=none tracking=none`` on a synthetic set (records,
metrics.json and report.md written) against a Python process that parses the same three
files with ``json`` and scores the rankings with pytrec_eval. The two run interleaved: a
first run of the command (raglab composes its configuration with Hydra and keeps it), then
``--repeat`` more, each into its own run directory; the median of the repeats' ratios
(wall and CPU; each run against the one beside it, since the machine's speed drifts) is
printed, the wall ratio against the target (the time a user waits), the first run's ratio
beside it. raglab's CPU time includes its workers' (``wait4`` counts the children a process
reaped); the number of processes that scored the cases is printed (``concurrency`` and the
usable CPUs decide it).

    python -m tests.benchmarks replay [--cases 2000] [--depth 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from pathlib import Path

from tests.benchmarks.common import load, python, timed_process, verdict
from tests.benchmarks.replay_data import make

TARGET = 2.0


def raglab_cmd(paths: dict[str, Path], run_dir: Path, cache: Path) -> list[str]:
    return [python(), "-m", "raglab.cli", "run", "system=replay",
            f"system.path={paths['outputs']}", f"dataset.corpus={paths['corpus']}",
            f"dataset.cases={paths['cases']}", "dataset.labels=null", "grader=none",
            "tracking=none", f"hydra.run.dir={run_dir}", f"cache_dir={cache}", "progress=off"]


def trec_cmd(paths: dict[str, Path], out: Path) -> list[str]:
    return [python(), "-m", "tests.benchmarks.trec_baseline", str(paths["corpus"]),
            str(paths["cases"]), str(paths["outputs"]), str(out)]


def measure(n_cases: int, depth: int, repeat: int, slices: int = 50) -> dict:
    """The first raglab run of the command composes its configuration with Hydra (and keeps
    it in the cache directory); the repeats, each with its own run directory, start from
    the kept composition, as a user's next run of the same command does."""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        paths = make(tmp / "data", n_cases, depth, slices)
        rag, trec = [], []
        for i in range(repeat + 1):
            run_dir = tmp / f"run{i}"
            rag.append(timed_process(raglab_cmd(paths, run_dir, tmp / "cache")))
            trec.append(timed_process(trec_cmd(paths, tmp / "trec.json")))
            for f in ("records.jsonl", "metrics.json", "report.md"):
                assert (run_dir / f).is_file(), f
            processes = json.loads((run_dir / "metrics.json").read_text())["processes"]
            shutil.rmtree(run_dir)
        return {"first": rag[0], "first_trec": trec[0], "raglab": rag[1:], "trec": trec[1:],
                "processes": processes}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    print(f"replay: {a.cases} cases x {a.depth} candidates, a first run and {a.repeat} "
          f"interleaved repeats ({load()})")
    r = measure(a.cases, a.depth, a.repeat)
    for what in ("wall", "cpu"):
        rag = statistics.median(x[what] for x in r["raglab"])
        trec = statistics.median(x[what] for x in r["trec"])
        # each raglab run against the pytrec_eval run beside it (the machine's speed drifts
        # over a benchmark); the median of those ratios
        pairs = sorted(x[what] / y[what] for x, y in zip(r["raglab"], r["trec"]))
        ratio = statistics.median(pairs)
        # the target is the time a user waits; CPU time (all of raglab's processes together)
        # is shown beside it, with no target of its own
        judged = (f"target <= {TARGET:g}) [{verdict(ratio <= TARGET)}]" if what == "wall"
                  else "no target: the time of all processes together)")
        print(f"  {what:4}: raglab {rag:.2f} s, pytrec_eval process {trec:.2f} s (medians); "
              f"ratio {ratio:.2f} (median of {len(pairs)} side-by-side ratios, "
              f"{pairs[0]:.2f} to {pairs[-1]:.2f}; {judged}")
    first = r["first"]["wall"] / r["first_trec"]["wall"]
    print(f"  first run of the command (composed with Hydra, then kept): raglab "
          f"{r['first']['wall']:.2f} s wall, ratio {first:.2f}")
    print(f"  peak RSS: raglab {max(x['rss_mib'] for x in r['raglab']):.0f} MiB; "
          f"{r['processes']} process(es) scored the cases (CPU time is theirs together)")


if __name__ == "__main__":
    main()
