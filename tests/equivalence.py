"""Outputs of the demo run, a replay run, a sweep and a comparison, snapshotted so that a
refactoring can show it changed nothing a user relies on.

    python -m tests.equivalence snapshot DIR   # run the commands into DIR (any raglab)
    python -m tests.equivalence diff A B        # compare two snapshots; exit 1 on a difference

A snapshot runs, in DIR: the demo run (heuristic grader), a replay of that run's outputs
with no grader and with the heuristic grader, a two-job sweep over ``k`` and ``raglab compare``
of the two sweep jobs. ``diff`` compares records.jsonl, metrics.json, report.md, the
quarantine and compare.json line by line, after dropping what differs between any two runs
of the same code: measured latencies, timings, absolute paths, MLflow run ids and dates.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

#: keys whose values are measured or machine-specific (dropped wherever they appear)
VOLATILE_KEYS = {"latency_ms", "mlflow", "processes", "elapsed_s", "created", "date",
                 "run_id", "started", "finished", "duration_s", "path", "paths", "uri",
                 "tracking_uri", "artifact_uri", "generated", "run_dir",
                 "config_hash",
                 # compare: adjusted within a family that holds the measured latencies
                 "p_adjusted", "family_size"}
VOLATILE_METRIC = re.compile(r"^(latency_ms\.|.*latency)")
RUNS = ("demo", "replay", "replay_graded", "sweep/0", "sweep/1")
FILES = ("records.jsonl", "metrics.json", "quarantine.jsonl")


def _run(args: list[str], cwd: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "raglab.cli", *args], cwd=cwd,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"raglab {' '.join(args)} failed ({proc.returncode}):\n"
                         f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def snapshot(out: Path) -> None:
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    common = ["tracking=none"]
    _run(["run", "hydra.run.dir=demo", *common], out)
    outputs = out / "outputs.jsonl"
    with open(out / "demo" / "records.jsonl", encoding="utf-8") as fh, \
            open(outputs, "w", encoding="utf-8") as fo:
        for line in fh:
            fo.write(json.dumps(json.loads(line)["output"]) + "\n")
    _run(["run", "hydra.run.dir=replay", "system=replay", f"system.path={outputs}",
          "grader=none", *common], out)
    _run(["run", "hydra.run.dir=replay_graded", "system=replay", f"system.path={outputs}",
          *common], out)
    _run(["run", "-m", "k=3,5", "hydra.sweep.dir=sweep", *common], out)
    _run(["compare", "sweep/0", "sweep/1", "--out", "compare"], out)


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in sorted(value.items())
                if k not in VOLATILE_KEYS and not VOLATILE_METRIC.match(str(k))}
    if isinstance(value, list):
        return [_clean(v) for v in value
                if not (isinstance(v, dict) and VOLATILE_METRIC.match(str(v.get("metric"))))]
    if isinstance(value, float):
        return round(value, 12)
    return value


def _lines(path: Path) -> list[str]:
    if not path.exists():
        return ["<missing>"]
    if path.suffix == ".json":
        return json.dumps(_clean(json.loads(path.read_text(encoding="utf-8"))), indent=1,
                          sort_keys=True).splitlines()
    if path.suffix == ".jsonl":
        return [json.dumps(_clean(json.loads(line)), sort_keys=True)
                for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"\d+(\.\d+)? ?(ms|s)\b", "<time>", text)
    text = re.sub(r"/\S+", "<path>", text)
    return [line for line in text.splitlines() if "latency" not in line]


def diff(a: Path, b: Path) -> int:
    pairs = [(f"{r}/{f}") for r in RUNS for f in (*FILES, "report.md")]
    pairs.append("compare/compare.json")
    bad = 0
    for rel in pairs:
        la, lb = _lines(a / rel), _lines(b / rel)
        if la != lb:
            bad += 1
            first = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y),
                         min(len(la), len(lb)))
            print(f"DIFFERENT {rel} (first at line {first + 1}; {len(la)} vs {len(lb)} lines)")
            if first < len(la):
                print(f"  {a.name}: {la[first][:300]}")
            if first < len(lb):
                print(f"  {b.name}: {lb[first][:300]}")
        else:
            print(f"same      {rel} ({len(la)} lines)")
    print(f"{len(pairs) - bad} same, {bad} different")
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "snapshot":
        snapshot(Path(argv[1]))
        return 0
    if len(argv) == 3 and argv[0] == "diff":
        return diff(Path(argv[1]), Path(argv[2]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
