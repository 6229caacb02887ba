"""Benchmark: replay scoring against a bare pytrec_eval process, per case and whole.

``raglab run system=replay grader=none tracking=none`` on synthetic sets (records,
metrics.json and report.md written; one process, its configuration composed with Hydra)
against a Python process that parses the same three files with ``json`` and scores the
rankings with pytrec_eval (``tests/benchmarks/trec_baseline.py``), at two sizes
(``--small`` and ``--large`` cases, ``--depth`` candidates each). Each of ``--repeat``
rounds runs the four processes interleaved (raglab and pytrec_eval at the small size, then
at the large one), each raglab run into its own run directory. Everything is CPU time
(user + system: the work done, whatever the machine's load).

The target is on the marginal CPU per case, ``(CPU at large - CPU at small) / (large -
small)``: start-up (imports, Hydra's composition, the report) does not grow with the cases
and cancels out. The ratio of raglab's marginal cost to the pytrec_eval process's, per
round (side by side, since the machine's speed drifts), median over the rounds: at most
``TARGET_MARGINAL``. The whole-process ratio at the small size is printed beside it, and
next to it the floor (``--floor``, on by default; ``--no-floor`` skips it): the two
processes of ``tests/benchmarks/replay_floor.py``, the Hydra start-up and composition every
run goes through, and one validation per replayed line with the records' output written
back, whose sum is the least CPU any replay run can take under the design's rules.

    python -m tests.benchmarks replay [--small 2000] [--large 20000] [--depth 100]
                                      [--repeat 3] [--no-floor]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

from tests.benchmarks.common import load, python, timed_process, verdict
from tests.benchmarks.replay_data import make

TARGET_MARGINAL = 2.0  # raglab's marginal CPU per case over the pytrec_eval process's


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


def measure(sizes: tuple[int, int], depth: int, repeat: int, slices: int = 50,
            floor: bool = False) -> dict:
    """``{size: {"raglab": [...], "trec": [...]}}`` and ``"floor"`` (at the small size):
    one timing per round, the processes of a round interleaved."""
    out: dict = {n: {"raglab": [], "trec": []} for n in sizes}
    out["floor"] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        data = {n: make(tmp / f"data{n}", n, depth, slices) for n in sizes}
        for i in range(repeat):
            for n in sizes:
                paths, run_dir = data[n], tmp / f"run{n}-{i}"
                out[n]["raglab"].append(timed_process(raglab_cmd(paths, run_dir,
                                                                 tmp / "cache")))
                out[n]["trec"].append(timed_process(trec_cmd(paths, tmp / "trec.json")))
                for f in ("records.jsonl", "metrics.json", "report.md"):
                    assert (run_dir / f).is_file(), f
                shutil.rmtree(run_dir)
            if floor:
                parts = [timed_process(cmd)
                         for cmd in floor_cmds(data[sizes[0]], tmp / "floor", tmp)]
                out["floor"].append({k: sum(p[k] for p in parts) for k in ("cpu", "wall")}
                                    | {"hydra": parts[0]["cpu"], "outputs": parts[1]["cpu"]})
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=2000)
    ap.add_argument("--large", type=int, default=20000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--floor", action=argparse.BooleanOptionalAction, default=True,
                    help="also time the least work any replay run must do (replay_floor)")
    a = ap.parse_args(argv)
    small, large = a.small, a.large
    print(f"replay: {small} and {large} cases x {a.depth} candidates, grader=none, raglab "
          f"against the pytrec_eval process, {a.repeat} interleaved rounds ({load()})")
    r = measure((small, large), a.depth, a.repeat, floor=a.floor)
    med = statistics.median
    for n in (small, large):
        rag, trec = (med(x["cpu"] for x in r[n][k]) for k in ("raglab", "trec"))
        print(f"  {n:>6} cases: raglab {rag:.2f} s CPU, pytrec_eval process {trec:.2f} s "
              f"(medians); peak RSS raglab {max(x['rss_mib'] for x in r[n]['raglab']):.0f} MiB")
    span = large - small
    per = {k: [(b["cpu"] - s_["cpu"]) / span for s_, b in zip(r[small][k], r[large][k])]
           for k in ("raglab", "trec")}
    ratios = sorted(x / y for x, y in zip(per["raglab"], per["trec"]))
    ratio = med(ratios)
    print(f"  marginal CPU per case ((CPU at {large} - CPU at {small}) / {span}): raglab "
          f"{1000 * med(per['raglab']):.3f} ms, pytrec_eval process "
          f"{1000 * med(per['trec']):.3f} ms (medians); ratio {ratio:.2f}x (median of "
          f"{len(ratios)} side-by-side ratios, {ratios[0]:.2f} to {ratios[-1]:.2f}); "
          f"target: at most {TARGET_MARGINAL:g}x [{verdict(ratio <= TARGET_MARGINAL)}]")
    whole = sorted(x["cpu"] / y["cpu"] for x, y in zip(r[small]["raglab"], r[small]["trec"]))
    wall = med(x["wall"] / y["wall"] for x, y in zip(r[small]["raglab"], r[small]["trec"]))
    print(f"  whole process at {small} cases: CPU ratio {med(whole):.2f}x ({whole[0]:.2f} to "
          f"{whole[-1]:.2f}), wall {wall:.2f}x (no target)")
    if r["floor"]:
        fl = sorted(x["cpu"] / y["cpu"] for x, y in zip(r["floor"], r[small]["trec"]))
        hydra = med(x["hydra"] for x in r["floor"])
        outputs = med(x["outputs"] for x in r["floor"])
        above = med(x["cpu"] / y["cpu"] for x, y in zip(r[small]["raglab"], r["floor"]))
        print(f"  floor at {small} cases: Hydra start-up and composition {hydra:.2f} s CPU + "
              f"one validation per line with the outputs written back {outputs:.2f} s = "
              f"{hydra + outputs:.2f} s; {med(fl):.2f}x the pytrec_eval process, before any "
              f"scoring; the whole raglab process is {above:.2f}x the floor")


if __name__ == "__main__":
    main()
