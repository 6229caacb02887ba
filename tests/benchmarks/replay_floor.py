"""The least work any replay run must do, as two processes the replay benchmark times
beside raglab (``python -m tests.benchmarks replay --floor``):

- ``hydra``: a ``@hydra.main`` application over raglab's own ``conf/`` (schema defaults
  registered, the benchmark's overrides) whose task does nothing: the start-up and the
  composition every ``raglab run`` goes through, since every run composes with Hydra;
- ``outputs``: each line of the replay file validated once with the one output schema
  (``SystemOutput.model_validate_json``) and written back as JSON straight from the model
  (pydantic-core; a run also takes each output as a dict to score it): one parse per line
  and the volume of the records' ``output``, with no scoring at all.

    python -m tests.benchmarks.replay_floor hydra OVERRIDE...
    python -m tests.benchmarks.replay_floor outputs REPLAY_FILE OUT_FILE
"""

from __future__ import annotations

import sys


def hydra_app(overrides: list[str]) -> None:
    import hydra

    from raglab.commands.common import conf_dir
    from raglab.commands.compose import register_schema_defaults

    register_schema_defaults()

    @hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")
    def task(cfg) -> None:  # composed: nothing else to do
        assert cfg.system.name

    sys.argv = [sys.argv[0], *overrides]
    task()


def outputs(replay: str, out: str) -> None:
    from raglab.data.schema import SystemOutput

    with open(replay, "rb") as fh, open(out, "wb") as sink:
        for line in fh:
            if line.strip():
                sink.write(SystemOutput.model_validate_json(line).model_dump_json().encode())
                sink.write(b"\n")


if __name__ == "__main__":
    if sys.argv[1] == "hydra":
        hydra_app(sys.argv[2:])
    else:
        outputs(sys.argv[2], sys.argv[3])
