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

Then (``--stages``, on by default) where raglab's marginal CPU goes: one more raglab run at
each size in a process that times each stage (``tests/benchmarks/replay_stages.py``), each
stage's slope per case, printed as a table next to the pytrec_eval process's marginal CPU
and the ratio; ``--write`` puts that table into docs/performance.md ("What a replayed case
costs", between its markers).

    python -m tests.benchmarks replay [--small 2000] [--large 20000] [--depth 100]
                                      [--repeat 3] [--no-floor] [--no-stages] [--write]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from tests.benchmarks.common import (
    ROOT,
    load,
    python,
    timed_process,
    verdict,
    write_between,
)
from tests.benchmarks.replay_data import make

TARGET_MARGINAL = 3.0  # raglab's marginal CPU per case over the pytrec_eval process's
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- replay-stages:begin -->", "<!-- replay-stages:end -->"


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


def stages_cmd(paths: dict[str, Path], run_dir: Path, cache: Path, out: Path) -> list[str]:
    """raglab's run of ``raglab_cmd`` in a process that times each stage (replay_stages)."""
    return [python(), "-m", "tests.benchmarks.replay_stages", str(out),
            *raglab_cmd(paths, run_dir, cache)[4:]]


def measure(sizes: tuple[int, int], depth: int, repeat: int, slices: int = 50,
            floor: bool = False, stages: bool = False) -> dict:
    """``{size: {"raglab": [...], "trec": [...]}}``, ``"floor"`` (at the small size) and
    ``"stages"`` (``{size: {stage: CPU}}``): one timing per round, the processes of a round
    interleaved; the stages after the rounds."""
    out: dict = {n: {"raglab": [], "trec": []} for n in sizes}
    out["floor"], out["stages"] = [], {}
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
        for n in sizes if stages else ():
            run_dir, result = tmp / f"stages{n}", tmp / f"stages{n}.json"
            timed_process(stages_cmd(data[n], run_dir, tmp / "cache", result))
            out["stages"][n] = json.loads(result.read_text(encoding="utf-8"))
            shutil.rmtree(run_dir)
    return out


#: what each stage of replay_stages holds, for the table
WHAT = {
    "read and check the cases and corpus": "the case set's lines read, validated, quotes "
    "located (and the two files hashed)",
    "hash the replay file (resume check)": "SHA-256 of the replay file, so that a resume "
    "refuses another file",
    "read and check the replay file": "each line validated once with the output schema "
    "(pydantic), before any case is scored: a bad line is one error",
    "read each line again for its case": "a file over 128 MB is not kept in memory: the "
    "line read again and parsed as plain JSON (the check's model is not kept)",
    "judge the hits": "which hits hold which evidence; ACL leaks",
    "check the spans": "each hit's span inside its document (its order is the output "
    "schema's check, once per list of hits)",
    "per-case metrics": "the case's metrics (`case_metrics`)",
    "serialise the record (and the secrets check)": "the self-contained record (the whole "
    "output) as one JSON line, pydantic-core",
    "append it to records.jsonl": "written and flushed per case (resume), fsync once a "
    "second",
    "aggregate, metrics.json, the report": "overall and slice means, the report",
    "other": "the case loop itself: the record model, the diagnosis, the row kept for "
    "aggregation (imports and Hydra cancel out)",
}


def stages_table(stages: dict, small: int, large: int, trec_ms: float, rag_ms: float,
                 ratio: float, ratios: list[float], note: str) -> str:
    """The per-case CPU of each stage (slope between the two sizes), as a Markdown table."""
    span = large - small
    per = {k: 1000 * (stages[large][k] - stages[small][k]) / span for k in stages[large]}
    total = per.pop("total")
    gc = per.pop("gc")
    rows = ["| stage | what it does | ms a case | share |", "|---|---|---|---|"]
    for k, ms in per.items():
        rows.append(f"| {k} | {WHAT[k]} | {ms:.3f} | {100 * ms / total:.0f}% |")
    rows += [f"| all stages (this process) | of which the garbage collector {gc:.3f} ms | "
             f"{total:.3f} | 100% |",
             f"| raglab run (the timed processes, median) | | {rag_ms:.3f} | |",
             f"| pytrec_eval process (median) | `json` parse of the three files, "
             f"pytrec_eval scoring | {trec_ms:.3f} | |",
             f"| **ratio** | median of {len(ratios)} side-by-side ratios ({ratios[0]:.2f}x "
             f"to {ratios[-1]:.2f}x); target at most {TARGET_MARGINAL:g}x | "
             f"**{ratio:.2f}x** | |"]
    return "\n".join(rows) + "\n\n" + note


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=2000)
    ap.add_argument("--large", type=int, default=20000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--floor", action=argparse.BooleanOptionalAction, default=True,
                    help="also time the least work any replay run must do (replay_floor)")
    ap.add_argument("--stages", action=argparse.BooleanOptionalAction, default=True,
                    help="also time each stage of a run at both sizes (replay_stages)")
    ap.add_argument("--write", action="store_true",
                    help=f"put the stages' table into {DOC.name} (needs --stages)")
    a = ap.parse_args(argv)
    if a.write and not a.stages:
        ap.error("--write needs --stages")
    small, large = a.small, a.large
    print(f"replay: {small} and {large} cases x {a.depth} candidates, grader=none, raglab "
          f"against the pytrec_eval process, {a.repeat} interleaved rounds ({load()})")
    start_load = load()
    r = measure((small, large), a.depth, a.repeat, floor=a.floor, stages=a.stages)
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
    if r["stages"]:
        args = " ".join(argv if argv is not None else [])
        note = (f"Measured on {time.strftime('%Y-%m-%d', time.gmtime())} with `python -m "
                f"tests.benchmarks replay{' ' + args if args else ''}` ({small:,} and "
                f"{large:,} cases x {a.depth} candidates, grader=none, tracking=none, "
                f"{a.repeat} rounds): {start_load} at the start, {load()} at the end. "
                "The stages are one more run at each size in a process that times them "
                "(`tests/benchmarks/replay_stages.py`); each figure is the stage's slope.")
        text = stages_table(r["stages"], small, large, 1000 * med(per["trec"]),
                            1000 * med(per["raglab"]), ratio, ratios, note)
        print("\n" + text)
        if a.write:
            write_between(DOC, BEGIN, END, text)
            print(f"wrote the table into {DOC}")


if __name__ == "__main__":
    main()
