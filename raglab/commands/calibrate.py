"""``raglab calibrate [overrides]``: the configured grader against human labels.

``raglab calibrate --versions [cache_dir=DIR]`` lists the calibration records side by side.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

from raglab.commands.common import conf_dir, fail

HELP = """usage: raglab calibrate [overrides]
       raglab calibrate --versions [cache_dir=DIR]

Runs the configured grader (grader=heuristic|claude|openai, through the same cached judgments and
metric versions as `raglab run`) over the human labels of dataset.labels, which must be
given: dataset.labels=FILE, or dataset=NAME for a dataset config with labels of its own
(dataset=demo for the demo's); the calibration records that dataset's name, case count
and cases sha256, and a decision on another dataset flags it. It reports, for claims and
nuggets: Cohen's kappa (with its one-sided 95% lower bound, which min_kappa compares, and
quadratic-weighted kappa for nuggets), accuracy, per-label precision and recall, the
confusion matrix and leniency, with seeded bootstrap 95% intervals. Writes
calibration.json and calibration.md into its run directory (hydra.run.dir, default
outputs/calibrate/DATE/TIME), stores a record keyed by each family's metric version in
cache_dir (shown by `raglab run` next to the versions, by `raglab compare` and `raglab
decide`, which a gate set's min_kappa gates on), and logs
to MLflow (experiment raglab-calibration; tracking=none skips it).

  repeats=N (or grader.repeats=N)  N independent judgments per label: self-consistency
                                   (Fleiss' kappa, share of items where all repeats agree)
  seed=N resamples=N               the bootstrap (defaults 20240917, 2000; seed 0 to
                                   2^32-1, resamples 100 to 100,000)

Exit 0 done; 1 grader calls failed (cached judgments are kept; run again);
2 bad labels or usage (one line naming file and line; nothing written).
"""

_OPTS = {"repeats": "grader.repeats"}
_OWN = ("seed", "resamples")
_state: dict = {}


def main(argv: list[str]) -> None:
    if any(a in ("-h", "--help") for a in argv):
        print(HELP)
        return
    if "--versions" in argv:
        from raglab.errors import UserError

        try:
            _versions([a for a in argv if a != "--versions"])
        except UserError as e:
            fail(str(e), 2)
        return
    import hydra

    own: dict[str, int] = {}
    rest: list[str] = []
    for a in argv:
        key, eq, val = a.partition("=")
        if eq and key in _OWN:
            try:
                own[key] = int(val)
            except ValueError:
                fail(f"{a}: {key} must be an integer", 2)
        elif eq and key in _OPTS:
            rest.append(f"{_OPTS[key]}={val}")
        else:
            rest.append(a)
    from raglab.calibration.settings import parse_settings
    from raglab.errors import UserError

    try:
        _state.update(parse_settings(own).model_dump())
    except UserError as e:
        fail(str(e), 2)
    if not any(a.lstrip("+").startswith(("dataset.labels=", "dataset=")) for a in rest):
        fail("calibrate needs the human labels to judge against: give dataset.labels=FILE "
             "(with dataset.cases=FILE and dataset.corpus=FILE of the same dataset), or "
             "dataset=NAME for a dataset config with labels of its own (dataset=demo: the "
             "demo's)", 2)
    if not any(a.startswith("hydra.run.dir=") for a in rest):
        rest.insert(0, "hydra.run.dir=outputs/calibrate/${now:%Y-%m-%d}/${now:%H-%M-%S}")
    sys.argv = ["raglab calibrate", *rest]
    from raglab.commands.compose import register_schema_defaults, run_hydra_app

    register_schema_defaults()
    app = hydra.main(config_path=str(conf_dir()), config_name="config", version_base="1.3")(task)
    run_hydra_app(app, rest, "calibration run")


def _versions(overrides: list[str]) -> None:
    from raglab.calibration.records import read_records, records_path, versions_table
    from raglab.commands.compose import compose

    cfg = compose(overrides)
    records = read_records(cfg.cache_dir)
    print(f"calibration records in {records_path(cfg.cache_dir)}:")
    print(versions_table(records))


def _drop_empty(run_dir: Path) -> None:
    try:
        run_dir.rmdir()  # only when empty: Hydra made it; a failed calibration leaves nothing
    except OSError:
        pass


def task(dict_cfg) -> None:
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

    from raglab.config import parse_run_config
    from raglab.errors import UserError

    run_dir = Path(HydraConfig.get().runtime.output_dir).resolve()
    try:
        resolved = OmegaConf.to_container(dict_cfg, resolve=True, throw_on_missing=True)
        assert isinstance(resolved, dict)  # a composed config is a mapping
        cfg = parse_run_config(cast(dict[str, Any], resolved))
    except MissingMandatoryValue as e:
        _drop_empty(run_dir)
        fail(f"config {e.full_key}: missing value (set it with {e.full_key}=...)", 2)
    except OmegaConfBaseException as e:
        _drop_empty(run_dir)
        fail(" ".join(str(e).split()), 2)
    except UserError as e:
        _drop_empty(run_dir)
        fail(str(e), 2)
    try:
        code = calibrate(cfg, resolved, run_dir)
    except UserError as e:
        _drop_empty(run_dir)
        fail(str(e), 2)
    if code:
        _drop_empty(run_dir)
        sys.exit(code)


def calibrate(cfg, resolved: dict, run_dir: Path) -> int:
    from raglab.calibration.run import GraderCallsFailed
    from raglab.calibration.run import calibrate as run_calibration
    from raglab.calibration.summary import terminal_table
    from raglab.stats.agreement import DEFAULT_RESAMPLES, DEFAULT_SEED

    try:
        doc = run_calibration(cfg, resolved, run_dir, seed=_state.get("seed", DEFAULT_SEED),
                              resamples=_state.get("resamples", DEFAULT_RESAMPLES))
    except GraderCallsFailed as e:
        for err in e.errors[:20]:
            print(f"raglab: grader error: {err}", file=sys.stderr)
        print(f"raglab: error: {len(e.errors)} grader call(s) failed; nothing recorded "
              "(judgments that succeeded are cached: run again)", file=sys.stderr)
        return 1
    v = doc["versions"]
    print(f"raglab calibrate: grader {doc['grader']} (faithfulness {v['faithfulness']}, "
          f"nuggets {v['nuggets']}) on {doc['labels']['resolved']} ({doc['claims']['n']} "
          f"claims, {doc['nuggets']['n']} nuggets); repeats {doc['repeats']}")
    print(terminal_table(doc))
    print(f"work: {doc['work']}")
    print(f"wrote {run_dir / 'calibration.json'} and calibration.md; record added to "
          f"{doc['store']}")
    if doc["mlflow_run_id"]:
        print(f"MLflow run {doc['mlflow_run_id']} (experiment 'raglab-calibration')")
    return 0
