"""``raglab calibrate [overrides]``: the configured grader against human labels.

``raglab calibrate --versions [cache_dir=DIR]`` lists the calibration records side by side.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

from raglab.commands.common import conf_dir, fail

HELP = """usage: raglab calibrate [overrides]
       raglab calibrate --versions [cache_dir=DIR]

Runs the configured grader (grader=heuristic|claude, through the same cached judgments and
metric versions as `raglab run`) over the human labels of dataset.labels (the demo's by
default) and reports, for claims and nuggets: Cohen's kappa (and quadratic-weighted kappa
for nuggets), accuracy, per-label precision and recall, the confusion matrix and leniency,
with seeded bootstrap 95% intervals. Writes calibration.json and calibration.md into its
run directory (hydra.run.dir, default outputs/calibrate/DATE/TIME), stores a record keyed
by each family's metric version in cache_dir (shown by `raglab run` next to the versions),
and logs to MLflow (experiment raglab-calibration; tracking=none skips it).

  repeats=N (or grader.repeats=N)  N independent judgments per label: self-consistency
                                   (Fleiss' kappa, share of items where all repeats agree)
  seed=N resamples=N               the bootstrap (defaults 20240917, 2000)

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
    if own.get("resamples", 100) < 100:
        fail("resamples must be at least 100", 2)
    _state.update(own)
    if not any(a.startswith("hydra.run.dir=") for a in rest):
        rest.insert(0, "hydra.run.dir=outputs/calibrate/${now:%Y-%m-%d}/${now:%H-%M-%S}")
    sys.argv = ["raglab calibrate", *rest]
    app = hydra.main(config_path=str(conf_dir()), config_name="config", version_base="1.3")(task)
    app()


def _versions(overrides: list[str]) -> None:
    from raglab.report.calibration import read_records, records_path, versions_table
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
        cfg = parse_run_config(resolved)
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
        sys.exit(code)


def calibrate(cfg, resolved: dict, run_dir: Path) -> int:
    import asyncio

    from raglab import registry
    from raglab.cache import StageCache
    from raglab.calibration.judge import judge_labels
    from raglab.calibration.labels import load_labels
    from raglab.report.calibration import append_record, record_of
    from raglab.calibration.summary import markdown, summarise, terminal_table
    from raglab.data.dataset import file_sha256, load_cases, resolve_path
    from raglab.data.io import atomic_write_json, atomic_write_text
    from raglab.errors import ConfigError
    from raglab.graders.orchestrate import Grading
    from raglab.graders.spec import family_versions
    from raglab.runner.components import build_grader, grader_prompts
    from raglab.stats.agreement import DEFAULT_RESAMPLES, DEFAULT_SEED
    from raglab.systems.base import WorkCounter

    if cfg.grader.name == "none":
        raise ConfigError("grader=none has nothing to calibrate (choose grader=heuristic|claude)")
    if not cfg.dataset.labels:
        raise ConfigError("dataset.labels is not set (a labels file: README \"The data\")")
    labels_path = resolve_path(cfg.dataset.labels)
    cases, _ = load_cases(resolve_path(cfg.dataset.cases))
    questions = {c.id: c.question for c in cases}
    labels = load_labels(labels_path, questions)
    check = registry.hook("grader", cfg.grader.name, "preflight")
    if check is not None:
        check(cfg)
    tracked = cfg.tracking.name == "mlflow"
    if tracked:
        from raglab.tracking.mlflow_store import check_tracking

        check_tracking(cfg.tracking.uri)
    prompts = grader_prompts(cfg)
    versions = family_versions(cfg.grader, prompts, cfg.metrics)
    cache = StageCache(cfg.cache_dir)
    work = WorkCounter()
    repeats = getattr(cfg.grader, "repeats", 1)

    async def go():
        llm = None
        if registry.hook("grader", cfg.grader.name, "uses_llm", False):
            from raglab.llm.client import LLMClient

            settings = registry.hook("grader", cfg.grader.name, "llm_settings")(cfg.grader, cfg)
            llm = LLMClient(**settings, cache=cache)
        grader = build_grader(cfg, prompts, llm)
        grading = Grading(grader, cfg.grader.name, versions, cache, work, repeats)
        try:
            judged, errors = await judge_labels(grading, labels, questions)
        finally:
            if llm is not None:
                await llm.aclose()
            await grader.aclose()
        return grading.repeats, judged, errors, (llm.summary() if llm is not None else None)

    independent, judged, errors, usage = asyncio.run(go())
    if errors:
        for e in errors[:20]:
            print(f"raglab: grader error: {e}", file=sys.stderr)
        print(f"raglab: error: {len(errors)} grader call(s) failed; nothing recorded "
              "(judgments that succeeded are cached: run again)", file=sys.stderr)
        return 1
    seed = _state.get("seed", DEFAULT_SEED)
    resamples = _state.get("resamples", DEFAULT_RESAMPLES)
    result = summarise(labels, judged, repeats=repeats, independent=independent, seed=seed,
                       n_resamples=resamples)
    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "grader": cfg.grader.name, "versions": versions, "repeats": repeats,
           "labels": {"path": str(cfg.dataset.labels), "resolved": str(labels_path),
                      "sha256": file_sha256(labels_path), "n": len(labels)},
           "work": work.as_dict(), **({"model_usage": usage} if usage else {}), **result}
    run_dir.mkdir(parents=True, exist_ok=True)
    mlflow_id = None
    if tracked:
        mlflow_id = _log(cfg, resolved, doc, run_dir)
    atomic_write_text(run_dir / "calibration.md", markdown(doc))
    atomic_write_json(run_dir / "calibration.json", doc)
    store = append_record(cfg.cache_dir, record_of(doc, str(run_dir), mlflow_id))
    n_claims, n_nuggets = doc["claims"]["n"], doc["nuggets"]["n"]
    print(f"raglab calibrate: grader {cfg.grader.name} (faithfulness {versions['faithfulness']},"
          f" nuggets {versions['nuggets']}) on {labels_path} ({n_claims} claims, "
          f"{n_nuggets} nuggets); repeats {repeats}")
    print(terminal_table(doc))
    print(f"work: {doc['work']}")
    print(f"wrote {run_dir / 'calibration.json'} and calibration.md; record added to {store}")
    if mlflow_id:
        print(f"MLflow run {mlflow_id} (experiment 'raglab-calibration')")
    return 0


def _log(cfg, resolved: dict, doc: dict, run_dir: Path) -> str:
    """Log the calibration to MLflow before its files are written (the files go too)."""
    import tempfile

    from raglab.calibration.summary import markdown
    from raglab.report.calibration import EXPERIMENT
    from raglab.data.io import atomic_write_json, atomic_write_text
    from raglab.tracking.keys import flatten_config
    from raglab.tracking.standalone import log_standalone_run

    metrics: dict[str, float | None] = {}
    for sec in ("claims", "nuggets"):
        s = doc[sec]
        metrics.update({f"{sec}.n": s["n"], f"{sec}.kappa": s["kappa"],
                        f"{sec}.kappa_ci_low": s["ci_low"], f"{sec}.kappa_ci_high": s["ci_high"],
                        f"{sec}.accuracy": s["accuracy"]["value"],
                        f"{sec}.leniency": s["leniency"]["value"]})
        if "weighted_kappa" in s:
            metrics[f"{sec}.weighted_kappa"] = s["weighted_kappa"]["value"]
        sc = doc["self_consistency"][sec]
        metrics[f"self_consistency.{sec}.fleiss_kappa"] = sc["fleiss_kappa"]
        metrics[f"self_consistency.{sec}.all_agree"] = sc["all_agree"]
    tags = {f"raglab.metric_version.{k}": v for k, v in doc["versions"].items()}
    tags.update({"raglab.grader": doc["grader"], "raglab.labels_sha256": doc["labels"]["sha256"],
                 "raglab.labels": doc["labels"]["path"], "raglab.run_dir": str(run_dir),
                 "raglab.repeats": str(doc["repeats"])})
    params = {k: v for k, v in flatten_config({"grader": resolved.get("grader", {}),
                                               "dataset": resolved.get("dataset", {})}).items()}
    with tempfile.TemporaryDirectory() as tmp:
        j, md = Path(tmp) / "calibration.json", Path(tmp) / "calibration.md"
        atomic_write_json(j, doc)
        atomic_write_text(md, markdown(doc))
        return log_standalone_run(cfg.tracking.uri, EXPERIMENT,
                                  f"{doc['grader']}-{doc['versions']['faithfulness']}",
                                  params=params, metrics=metrics, tags=tags, artifacts=[j, md])
