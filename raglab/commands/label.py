"""``raglab label``: human labels on a random sample of a run's cases, and the run's
estimates on the human scale (the manual: docs/labels.md)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from raglab.commands.common import fail

HELP = """usage: raglab label RUN [RUN2] --n N --metrics M[,M...] [--seed S] [--by KEY] [--out FILE]
       raglab label RUN --review [--out FILE]
       raglab label RUN --from FILE
       raglab label RUN --plan --metrics M --width W
       raglab label RUN --update

Draw a random sample of a run's cases for people to label, label them in the terminal or
in a file, and correct the judge's metrics by prediction-powered inference (PPI++).

  --n N --metrics M    draw N cases (seeded: --seed S, default 0; the same seed draws the
                       same cases from the same case set; with RUN2, the same cases in both
                       runs, which must hold the same cases) and write the labelling file,
                       one JSON line per case and metric with "label": null (default:
                       RUN/labels/to-label.jsonl); --by KEY stratifies by the tag KEY
  --review             label the file in the terminal: y yes, p partial, n no, s skip,
                       b back, q quit; every key is saved at once, run it again to go on
  --from FILE          read a filled labelling file back (JSON Lines, or CSV with the same
                       columns: case_id, metric, label as 1/0, a number in [0, 1] or
                       yes/partial/no)
  --plan               labels needed for an interval of total width W on metric M, given
                       the judge's agreement with the labels so far
  --update             the estimates again from the stored labels (after an MLflow outage)

After --review, --from and --update, the run's metrics.json (its "ppi" section), its report
and its MLflow run gain each labelled metric's human-scale estimate and interval beside the judge's
mean. Labels are stored in RUN/labels/labels.jsonl, keyed by case, answer hash and metric
version: a label of another answer or judge version is never used.
"""

DEFAULT_FILE = "to-label.jsonl"


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(HELP)
        return
    ap = argparse.ArgumentParser(prog="raglab label", add_help=False)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--n", type=int)
    ap.add_argument("--metrics")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--by")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--review", action="store_true")
    ap.add_argument("--from", dest="from_file", type=Path)
    ap.add_argument("--plan", action="store_true")
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--width", type=float)
    args = ap.parse_args(argv)
    from raglab.errors import UserError

    modes = [m for m, on in (("--n", args.n is not None), ("--review", args.review),
                             ("--from", args.from_file is not None), ("--plan", args.plan),
                             ("--update", args.update)) if on]
    try:
        if len(modes) != 1:
            raise UserError("give one of --n, --review, --from, --plan or --update (raglab "
                            "label --help)")
        if len(args.runs) > 2 or (len(args.runs) == 2 and modes[0] != "--n"):
            raise UserError(f"{modes[0]} takes one run directory" if modes[0] != "--n"
                            else "at most two run directories")
        runs = [_run_dir(r) for r in args.runs]
        if args.n is not None:
            _sample(runs, args)
        elif args.review:
            _review(runs[0], args.out)
        elif args.from_file is not None:
            _from(runs[0], args.from_file)
        elif args.update:
            update_estimates(runs[0])
        else:
            _plan(runs[0], args)
    except UserError as e:
        fail(str(e), getattr(e, "exit_code", 2))


@contextmanager
def _held(*runs: Path, refused: str = "nothing was stored") -> Iterator[None]:
    """The run directories' locks, taken before anything is read and held until every file
    is written: no run resumes in them, and no other ``raglab label`` reads or writes their
    labels meanwhile. Held by another process: a UserError (exit 2) that ends with
    ``refused`` (what this command did not do)."""
    from contextlib import ExitStack

    from raglab.data.lockfile import FileLock, LockHeld
    from raglab.errors import UserError
    from raglab.runner.lock import LOCK_FILE

    with ExitStack() as stack:
        for run in dict.fromkeys(runs):  # (one run given twice: locked once)
            lock = FileLock(run / LOCK_FILE, what="the run directory")
            try:
                lock.acquire()
            except LockHeld as e:
                raise UserError("another raglab process" + (f" ({e.holder})" if e.holder
                                                            else "")
                                + f" is using this run directory; {refused}: try again when "
                                "it ends", file=str(run)) from None
            stack.callback(lock.release)
        yield


def _run_dir(path: Path) -> Path:
    from raglab.errors import UserError

    run = path.resolve()
    for name in ("records.jsonl", "metrics.json"):
        if not (run / name).is_file():
            raise UserError(f"{path}: not a finished run directory ({name} is missing)")
    return run


def _metrics(text: str | None, run: Path) -> list[str]:
    from raglab.data.io import read_run_metrics
    from raglab.errors import UserError
    from raglab.labels.store import labelled_spec, metric_version

    names = [m.strip() for m in (text or "").split(",") if m.strip()]
    if not names:
        raise UserError("--metrics: name the judged metrics to label, e.g. "
                        "--metrics correctness,faithfulness")
    versions = read_run_metrics(run).get("metric_versions") or {}
    for name in names:
        metric_version(versions, labelled_spec(name))
    return list(dict.fromkeys(names))


def _inputs(run: Path) -> list[tuple[Path, str]]:
    from raglab.cases.drafts import run_inputs
    from raglab.labels.store import LABELS_FILE, SAMPLE_FILE, labels_dir

    return [(p, "") for p in run_inputs(run)] + [
        (labels_dir(run) / LABELS_FILE, "the run's stored labels"),
        (labels_dir(run) / SAMPLE_FILE, "the run's sample design")]


def _sample(runs: list[Path], args: argparse.Namespace) -> None:
    from raglab.errors import UserError

    if args.out is not None and len(runs) == 2:
        raise UserError("--out names one file: with two runs each gets its labelling file in "
                        "its own directory (RUN/labels/to-label.jsonl)")
    with _held(*runs, refused="nothing was written"):
        _sample_held(runs, args)
    print("label them in the terminal with raglab label RUN --review, or fill the label "
          "column and read the file back with raglab label RUN --from FILE")


def _sample_held(runs: list[Path], args: argparse.Namespace) -> None:
    from raglab.cases.lock import ReviewLock
    from raglab.data.io import read_run_metrics, write_jsonl
    from raglab.errors import UserError, storage_error
    from raglab.labels.sample import draw, inclusion_probabilities
    from raglab.labels.sheet import sheet_rows
    from raglab.labels.store import labels_dir, read_sample, read_stored, run_cases, write_sample

    metrics = _metrics(args.metrics, runs[0])
    cases = [run_cases(r) for r in runs]
    if len(runs) == 2:
        _metrics(args.metrics, runs[1])
        if set(cases[0]) != set(cases[1]):
            only = sorted(set(cases[0]) ^ set(cases[1]))
            raise UserError(f"{runs[0]} and {runs[1]} hold different cases ({len(only)} in "
                            f"one only, e.g. {only[0]}): a paired sample needs the same cases")
    design = draw({cid: c.tags for cid, c in cases[0].items()}, args.n, args.seed, args.by)
    plans = []  # every run checked before anything is written
    for run in runs:
        stored = read_stored(run)
        run_metrics = list(metrics)
        before = read_sample(run)
        if before is not None and stored:
            old, extra = before
            if (old.seed, old.by, old.case_set_sha256) != (design.seed, design.by,
                                                           design.case_set_sha256):
                raise UserError(
                    f"{run}: it holds {len(stored)} label(s) of a sample drawn with seed "
                    f"{old.seed}" + (f" by {old.by}" if old.by else "")
                    + (" from other cases" if old.case_set_sha256 != design.case_set_sha256
                       else "")
                    + f"; labels of another sample would not be a random sample: draw with "
                    f"--seed {old.seed}" + (f" --by {old.by}" if old.by else ""))
            run_metrics = list(dict.fromkeys([*extra.get("metrics", []), *metrics]))
        out = args.out or labels_dir(run) / DEFAULT_FILE
        labelled = {lab.key: lab.label for lab in stored}
        _check_out(run, out, labelled)
        plans.append((run, out, run_metrics, labelled))
    for (run, out, run_metrics, labelled), run_case in zip(plans, cases, strict=True):
        versions = read_run_metrics(run).get("metric_versions") or {}
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise storage_error(e, "the labelling file", out) from None
        with ReviewLock(out, "labelling file"):
            rows = sheet_rows(run, design, run_metrics, versions, labelled)
            write_sample(run, design, {"n": args.n, "metrics": run_metrics,
                                       "inclusion_probability": inclusion_probabilities(design)})
            write_jsonl(out, rows)
        todo = sum(1 for r in rows if r["label"] is None)
        by = "" if design.by is None else ", by " + ", ".join(
            f"{h} {len(ids)}/{design.population[h]}" for h, ids in design.sampled.items())
        print(f"{run}: sampled {len(design.sampled_ids())} of {len(run_case)} cases (seed "
              f"{design.seed}{by}); {len(rows)} row(s) in {out}, {todo} to label")


def _check_out(run: Path, out: Path, labelled: dict) -> None:
    """Refuse a labelling file that is one of the run's files, not a regular file, not a
    labelling file, or holds labels not read back yet (it is rewritten)."""
    from raglab.data.io import check_writable_output, iter_json_lines, refuse_inputs
    from raglab.errors import UserError

    refuse_inputs(out, _inputs(run), f"--out {out}", "name another labelling file")
    if not out.exists() or not check_writable_output(out).stat().st_size:
        return
    old_rows = list(iter_json_lines(out, "labelling file"))
    foreign = next((line for line, row in old_rows
                    if not {"case_id", "metric", "answer_sha256"} <= set(row)), None)
    if foreign is not None:
        raise UserError(f"--out {out}: line {foreign} is not a labelling row; the file would "
                        "be overwritten: name another file")
    unsaved = [(line, row.get("case_id")) for line, row in old_rows
               if row.get("label") is not None
               and (row.get("case_id"), row.get("metric"), row.get("answer_sha256"),
                    row.get("metric_version")) not in labelled]
    if unsaved:
        raise UserError(f"{out}: holds {len(unsaved)} label(s) not read back yet (first: line "
                        f"{unsaved[0][0]}, case {unsaved[0][1]}); read them first with raglab "
                        f"label {run} --from {out}, or name another --out")


def _from(run: Path, path: Path) -> None:
    """Read the filled file and store its labels, then the estimates from every label
    stored: all under the run directory's lock (refused, nothing stored, while another
    process holds it)."""
    from raglab.data.io import read_run_metrics
    from raglab.errors import UserError
    from raglab.labels.sheet import read_filled
    from raglab.labels.store import read_sample, run_cases, store_labels

    with _held(run):
        sample = read_sample(run)
        if sample is None:
            raise UserError(f"{run}: no sample drawn yet; draw one with raglab label {run} "
                            "--n N --metrics M (labels count only on a random sample)")
        versions = read_run_metrics(run).get("metric_versions") or {}
        labels, blank, assumed = read_filled(path, sample[0], run_cases(run), versions,
                                             f"file:{path.name}")
        added, replaced = store_labels(run, labels)
        print(f"{path}: {len(labels)} label(s) read ({added} new, {replaced} changed, "
              f"{blank} row(s) without a label)" + (
                  f"; {assumed} without answer_sha256/metric_version, taken as labels of the "
                  "run's current answers" if assumed else ""))
        _estimates(run)


def _review(run: Path, out: Path | None) -> None:
    from raglab.cases.lock import ReviewLock
    from raglab.errors import UserError
    from raglab.labels.session import review
    from raglab.labels.store import StoredLabel, label_value, labelled_spec, labels_dir, now
    from raglab.labels.store import store_labels as store

    path = out or labels_dir(run) / DEFAULT_FILE
    if not path.is_file():
        raise UserError(f"{path}: no labelling file; draw the sample first with raglab label "
                        f"{run} --n N --metrics M")
    with ReviewLock(path, "labelling file"):
        _warn_changed(run, path)
        session = review(run, path)
        # every label of the file in the store (a Ctrl-C between the two writes of a key)
        labelled = [StoredLabel(r["case_id"], r["metric"], value, r["answer_sha256"],
                                r["metric_version"], now(), "terminal")
                    for r in session.rows if r.get("label") is not None
                    and (value := label_value(r["label"], labelled_spec(r["metric"])))
                    is not None]
        added, replaced = store(run, labelled)
    print(session.summary())
    if session.stored or added or replaced:
        update_estimates(run, refused=f"the labels are stored, the estimates not updated "
                         f"(raglab label {run} --update does it)")


def _warn_changed(run: Path, path: Path) -> None:
    """Say so when rows of the labelling file are of answers the run no longer has (their
    labels would be stored, and never used)."""
    from raglab.data.io import iter_json_lines
    from raglab.labels.store import run_cases

    cases = run_cases(run)
    changed = sum(1 for _, row in iter_json_lines(path, "labelling file")
                  if row.get("label") is None and row.get("case_id") in cases
                  and cases[row["case_id"]].answer_sha256 != row.get("answer_sha256"))
    if changed:
        print(f"raglab: warning: {changed} row(s) of {path} are of answers the run no longer "
              f"has (their labels would be stale); write the file again: raglab label {run} "
              "--n N --metrics M with the sample's seed", file=sys.stderr)


def update_estimates(run: Path, refused: str = "the estimates were not updated") -> None:
    """metrics.json's ppi section, the report and the run's MLflow run, from the labels
    stored, under the run directory's lock."""
    with _held(run, refused=refused):
        _estimates(run)


def _estimates(run: Path) -> None:
    """:func:`update_estimates` with the lock held: the labels are read under it, so the
    estimates are of every label stored, whatever another process stored before."""
    from raglab.data.io import atomic_write_json, read_run_metrics
    from raglab.labels.estimate import ppi_section

    section = ppi_section(run)
    metrics = read_run_metrics(run)
    if section is None:
        metrics.pop("ppi", None)
    else:
        metrics["ppi"] = section
    atomic_write_json(run / "metrics.json", metrics)
    report = _report(run)
    _print_estimates(section)
    _log(run, section, [run / "metrics.json", *report])


def _report(run: Path) -> list[Path]:
    """The run's report again, with its human-scale section (when the run has a report)."""
    from raglab.commands.compose import shipped_defaults
    from raglab.commands.log import _naming
    from raglab.data.io import read_run_config
    from raglab.report.run_report import rewrite_report_text
    from raglab.report.summary import config_diff
    from raglab.secrets import redact

    if not (run / "report.md").exists():
        return []
    name, _ = _naming(run, None)
    defaults = shipped_defaults()
    diffs = config_diff(redact(defaults), redact(read_run_config(run))) if defaults else None
    return rewrite_report_text(run, name, diffs)


def _print_estimates(section: dict[str, Any] | None) -> None:
    from raglab.report.format import fmt

    for metric, entry in sorted(((section or {}).get("metrics") or {}).items()):
        est, labels = entry.get("overall"), entry.get("labels") or {}
        counts = (f"{labels.get('usable')} usable label(s), {labels.get('stale')} stale, "
                  f"{labels.get('missing')} missing")
        if est is None:
            print(f"{metric}: no human-scale estimate ({entry.get('why')}); {counts}")
            continue
        print(f"{metric}: judge {fmt(est['judge_mean'])}, human scale {fmt(est['estimate'])} "
              f"[{fmt(est['ci_low'])}, {fmt(est['ci_high'])}] ({counts}; worth "
              f"{fmt(est['n_effective'])} labels alone; "
              f"{sum(len(v) for v in (entry.get('slices') or {}).values())} slice(s))")


def _log(run: Path, section: dict[str, Any] | None, files: list[Path]) -> None:
    from raglab.runner.identity import read_identity
    from raglab.secrets import clip_line

    tracked = read_identity(run).get("mlflow") or {}
    if not tracked.get("run_id") or not tracked.get("uri") or section is None:
        if section is not None:
            print(f"{run} has no MLflow run (tracking=none): metrics.json and the report "
                  "hold the estimates")
        return
    from raglab.tracking.results import log_ppi

    try:
        n = log_ppi(tracked["run_id"], tracked["uri"], section, files)
    except Exception as e:  # noqa: BLE001 - the store failed: one line, the files stand
        fail(f"MLflow run {tracked['run_id']} not updated ({type(e).__name__}: "
             f"{clip_line(e, 300)}); metrics.json and the report are; run raglab label "
             f"{run} --update once the store is back")
    print(f"MLflow run {tracked['run_id']}: {n} figure(s) logged")


def _plan(run: Path, args: argparse.Namespace) -> None:
    """The labels each metric needs for an interval ``--width`` wide, from the judge's
    agreement with the labels so far (raglab.stats.ppi_plan.labels_needed)."""
    from raglab.errors import UserError
    from raglab.labels.store import run_cases, usable_labels
    from raglab.report.format import fmt
    from raglab.stats.ppi_plan import labels_needed

    if args.width is None or not args.width > 0:
        raise UserError("--plan needs --width W, the full width of the interval wanted "
                        "(e.g. --width 0.1)")
    cases = run_cases(run)
    for metric in _metrics(args.metrics, run):
        labels = usable_labels(run, metric)
        if labels is None:
            raise UserError(f"{run}: no labels of {metric} yet; label a first batch (raglab "
                            f"label {run} --n 30 --metrics {metric}), then plan")
        judge = {c: float(s.metrics[metric]) for c, s in cases.items()
                 if isinstance(s.metrics.get(metric), int | float)}
        ids = [c for c in labels.values if c in judge]
        try:
            plan = labels_needed([labels.values[c] for c in ids], [judge[c] for c in ids],
                                 list(judge.values()), width=args.width, bounds=(0.0, 1.0))
        except ValueError as e:  # too few labels so far (TooFewLabels), a bad width
            raise UserError(f"{metric}: {' '.join(str(e).split())}; label a first batch, "
                            "then plan") from None
        design = " (planned as a simple random sample)" if labels.design.by else ""
        so_far = (f"{plan.n_labelled} usable so far, an interval about "
                  f"{fmt(plan.width_now)} wide now")
        if plan.labels_needed is None:
            print(f"{metric}: an interval {fmt(args.width)} wide is out of reach: all "
                  f"{plan.n_all} cases labelled would give about {fmt(plan.planned_width)}"
                  f" ({so_far}){design}")
            continue
        print(f"{metric}: {plan.labels_needed} labels for an interval {fmt(args.width)} wide "
              f"({plan.more} more; {so_far}; lambda {fmt(plan.lam)}, worth "
              f"{fmt(plan.n_effective)} labels alone){design}")
        if not plan.more and plan.width_now > args.width:
            print(f"  the interval reported now is {fmt(plan.width_now)} wide, wider than the "
                  "plan's symmetric one: the labels are skewed (few disagreements), and more "
                  "labels are what narrows it")
        if plan.more:
            print(f"  draw them with the same seed: raglab label {run} --n "
                  f"{_cases_for(labels, plan.labels_needed)} --metrics {metric} --seed "
                  f"{labels.design.seed}" + (f" --by {labels.design.by}"
                                             if labels.design.by else ""))


def _cases_for(labels: Any, needed: int) -> int:
    """The sample size that gives about ``needed`` labels of the metric (it does not apply
    to every sampled case)."""
    sampled = len(labels.design.sampled_ids())
    applies = len(labels.values) + labels.stale + labels.missing
    return max(sampled, math.ceil(needed * sampled / applies)) if applies else needed


if __name__ == "__main__":
    main(sys.argv[1:])
