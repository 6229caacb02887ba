"""The ``raglab`` command. Dispatches on the first argument; heavy imports (Hydra, MLflow)
happen only inside the subcommand that needs them, so ``raglab --help`` is fast."""

from __future__ import annotations

import sys

USAGE = """usage: raglab COMMAND [ARGS]

Evaluate retrieval-augmented generation systems (the manual: docs/ in the source tree).

commands:
  init NAME --corpus FILE --cases FILE [--labels FILE]
                         check your own data and name it: writes conf/dataset/NAME.yaml,
                         so `raglab run dataset=NAME` works from this folder
  run [overrides]        run one configuration; `run -m a=1,2 b=x,y` sweeps (Hydra multirun)
  validate [overrides]   check a dataset: schema, ids, gold quotes; writes quarantine.jsonl
  log RUN_DIR [--uri URI] [--experiment NAME]
                         log a finished run directory to MLflow (e.g. after an outage)
  compare BASELINE CANDIDATE | SWEEP --baseline JOB
                         paired per-slice comparison; writes compare.md/.html/.json
  decide BASELINE CANDIDATE gates=NAME [--study DIR]
                         apply a gate set; writes decision-DATE-NAME.md/.json; exit 0 GO,
                         1 NO-GO, 4 INCONCLUSIVE (no gate breached, one not shown)
  plan BASELINE gates=NAME [--changed SHARE]
                         before a candidate runs: per gated check and slice, the cases now,
                         the smallest change detectable and the cases the margin needs
  calibrate [overrides]  the grader against human labels: kappa with intervals, confusion
                         matrices, leniency; `calibrate --versions` lists the records
  monitor TRAFFIC [--baseline B] [overrides]
                         reference-free metrics of production traffic per time window,
                         drift and contradiction alerts (exit 1 when one fired)
  label RUN [RUN2] --n N --metrics M | RUN --review | RUN --from FILE | RUN --plan
                         people label a random sample of a run's answers; the judged
                         metrics gain human-scale (prediction-powered) estimates
  cases from-run|from-traffic|draft|review|add
                         failing cases, traffic and the corpus as drafts; review drafts; add
                         labelled cases to the set

overrides are Hydra overrides, e.g. dataset.corpus=PATH dataset.cases=PATH system=replay
system.path=PATH grader=heuristic|claude|openai|none chunker.size=256 k=5 tracking=none.
`raglab run --help` lists every config group and its choices.
"""


#: command -> the module whose ``main(argv)`` runs it (imported only when used)
COMMANDS = {
    "init": "raglab.commands.init",
    "run": "raglab.commands.run",
    "validate": "raglab.commands.validate",
    "log": "raglab.commands.log",
    "compare": "raglab.commands.compare",
    "decide": "raglab.commands.decide",
    "plan": "raglab.commands.plan",
    "calibrate": "raglab.commands.calibrate",
    "monitor": "raglab.commands.monitor",
    "cases": "raglab.commands.cases",
    "label": "raglab.commands.label",
}


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
    module = COMMANDS.get(cmd)
    if cmd == "cases" and rest[:1] in (["draft"], ["review"]):
        module = "raglab.commands.cases_draft"
    if module is None:
        from raglab.commands.common import fail

        fail(f"unknown command {cmd!r} (commands: {', '.join(COMMANDS)}; see raglab --help)", 2)
    import importlib

    importlib.import_module(module).main(rest)


if __name__ == "__main__":
    main()
