"""Where a replay run's CPU goes, by stage: ``raglab run`` in this process with a CPU timer
(``time.process_time``: user + system) around each stage's function, written as JSON.

    python -m tests.benchmarks.replay_stages OUT_JSON RAGLAB_RUN_ARG...

Each stage's time is its own (a stage called inside another counts for itself only);
``other`` is the rest of the process (imports, Hydra's composition, the event loop, the
record model and diagnosis of each case). The garbage collector's time falls inside the
stage whose allocation started it; its total is given apart as ``gc`` (not added). The
replay benchmark (``bench_replay --stages``) runs this at two sizes and takes the slope of
each stage, so what does not grow with the cases cancels out.
"""

from __future__ import annotations

import functools
import gc
import importlib
import json
import sys
import time
from collections import Counter
from typing import Any

#: (label, module, attribute): the function whose CPU is the stage's
STAGES = (
    ("read and check the cases and corpus", "raglab.runner.run", "load_dataset"),
    ("hash the replay file (resume check)", "raglab.systems.replay", "ReplaySystem.identity"),
    ("read and check the replay file", "raglab.systems.replay", "ReplaySystem.__init__"),
    ("read each line again for its case", "raglab.systems.replay", "ReplaySystem.answer"),
    ("judge the hits", "raglab.runner.case", "judge_output"),
    ("check the spans", "raglab.runner.case", "check_spans"),
    ("per-case metrics", "raglab.runner.case", "case_metrics"),
    ("serialise the record (and the secrets check)", "raglab.runner.case", "public_line"),
    ("append it to records.jsonl", "raglab.runner.records", "RecordWriter.append"),
    ("aggregate, metrics.json, the report", "raglab.runner.run", "Run._finish"),
)

own: Counter[str] = Counter()
_inner: list[float] = []  # the CPU of the stages called inside the running one


def _timed(fn: Any, label: str) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.process_time()
        _inner.append(0.0)
        try:
            return fn(*args, **kwargs)
        finally:
            spent = time.process_time() - t0
            own[label] += spent - _inner.pop()
            if _inner:
                _inner[-1] += spent
    return wrapper


def install() -> None:
    for label, module, attr in STAGES:
        owner: Any = importlib.import_module(module)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        fn = owner.__dict__[name]
        if isinstance(fn, classmethod):
            setattr(owner, name, classmethod(_timed(fn.__func__, label)))
        else:
            setattr(owner, name, _timed(fn, label))


def main(out: str, args: list[str]) -> None:
    gc_time = [0.0, 0.0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_time[1] = time.process_time()
        else:
            gc_time[0] += time.process_time() - gc_time[1]

    t0 = time.process_time()
    gc.callbacks.append(on_gc)
    from raglab import cli

    install()
    code = 0
    try:
        cli.main(["run", *args])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    total = time.process_time() - t0
    result = {label: own[label] for label, _, _ in STAGES}
    result["other"] = total - sum(result.values())
    result |= {"total": total, "gc": gc_time[0]}
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
