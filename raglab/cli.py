"""The ``raglab`` command. Dispatches on the first argument; heavy imports (Hydra, MLflow)
happen only inside the subcommand that needs them, so ``raglab --help`` is fast."""

from __future__ import annotations

import sys
from pathlib import Path

USAGE = """usage: raglab COMMAND [ARGS]

Evaluate retrieval-augmented generation systems (see README.md).

commands:
  run [overrides]        run one configuration; `run -m a=1,2 b=x,y` sweeps (Hydra multirun)
  validate [overrides]   check a dataset: schema, ids, gold quotes; writes quarantine.jsonl
  log RUN_DIR [--uri URI] [--experiment NAME]
                         log a finished run directory to MLflow (e.g. after an outage)
  compare BASELINE CANDIDATE | SWEEP --baseline JOB
                         paired per-slice comparison; writes compare.md/.html/.json
  decide BASELINE CANDIDATE gates=NAME [--study DIR]
                         apply a gate set; writes decision-DATE-NAME.md/.json; exit 0 GO, 1 NO-GO

overrides are Hydra overrides, e.g. dataset.corpus=PATH dataset.cases=PATH system=replay
system.path=PATH grader=heuristic|claude|none chunker.size=256 k=5 tracking=none.
`raglab run --help` lists every config group and its choices.
"""


def conf_dir() -> Path:
    """The shipped configs: inside the installed package, or conf/ beside it in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "conf", here.parent / "conf"):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise SystemExit("raglab: error: the shipped configs (conf/) are missing from the install")


def _fail(message: str, code: int = 1) -> None:
    print(f"raglab: error: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    try:
        _main(argv)
    except BrokenPipeError:  # output piped into a command that stopped reading (e.g. head)
        sys.stderr.close()
        sys.exit(1)


def _main(argv: list[str] | None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return
    if argv[0] in ("-V", "--version"):
        from raglab import __version__

        print(f"raglab {__version__}")
        return
    cmd, rest = argv[0], argv[1:]
    if cmd == "run":
        from raglab.commands.run import main as run_main

        run_main(rest)
    elif cmd == "validate":
        from raglab.commands.validate import main as validate_main

        validate_main(rest)
    elif cmd == "log":
        from raglab.commands.log import main as log_main

        log_main(rest)
    elif cmd == "compare":
        from raglab.commands.compare import main as compare_main

        compare_main(rest)
    elif cmd == "decide":
        from raglab.commands.decide import main as decide_main

        decide_main(rest)
    else:
        _fail(f"unknown command {cmd!r} (commands: run, validate, log, compare, decide; "
              "see raglab --help)", 2)


if __name__ == "__main__":
    main()
