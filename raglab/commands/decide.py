"""``raglab decide BASELINE CANDIDATE gates=NAME [--study DIR]``: gates and a decision record."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from raglab.commands.common import conf_dir
from raglab.commands.common import fail as _fail
from raglab.commands.compare import add_pairing_options
from raglab.text.escape import term

DESCRIPTION = """Compare a candidate run with a baseline run (run directories or MLflow run
ids) and apply a predeclared gate set (conf/gates/NAME.yaml, or gates=PATH.yaml; change one
field with gates.FIELD=VALUE, add one with +gates.FIELD=VALUE, e.g.
+gates.min_kappa.faithfulness=0.6). Writes decision-DATE-NAME.md, .json and .html into the
study folder (a second decision of the day gets decision-DATE-NAME-2, ...) and lists every
record in its decisions.md.
Each check is pass, fail (the data show the breach) or inconclusive (neither: the check says
how many paired cases would settle it); the decision is NO-GO when a check fails, else
INCONCLUSIVE when one is inconclusive, else GO.
Exit 0 GO, 1 NO-GO, 2 usage or input error, 3 metric versions differ, 4 INCONCLUSIVE."""

EPILOG = """examples:
  raglab decide outputs/k3 outputs/k5 gates=default --study experiments/chunk_k
  raglab decide 0f3c...e1 9a1b...77 gates=ci/gates.yaml --uri sqlite:///mlflow.db
  raglab decide outputs/k3 outputs/k5 gates=default +gates.min_kappa.faithfulness=0.6
  raglab decide runs/main runs/pr gates=default --junit junit.xml --comment comment.md
the record shows each gated family's latest calibration (raglab calibrate) and whether a run
was self-graded; min_kappa makes an uncalibrated or lower-kappa judge NO-GO.
compare options (--set, --adjust, --allow-*) work as in `raglab compare`; the intervals'
confidence and the significance level come from the gate set's `confidence`."""


#: the exit code of each decision (DESIGN.md: 2 and 3 are usage and version errors)
EXIT_CODES = {"GO": 0, "NO-GO": 1, "INCONCLUSIVE": 4}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line (a stray argument shown as by term), exit 2
        _fail(f"decide: {message} (see raglab decide --help)", 2)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="raglab decide", description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("baseline", metavar="BASELINE", help="run directory or MLflow run id")
    ap.add_argument("candidate", metavar="CANDIDATE", help="run directory or MLflow run id")
    ap.add_argument("--study", type=Path, default=Path("."), metavar="DIR",
                    help="study folder the decision record is written to (default: .)")
    ap.add_argument("--name", default=None, help="NAME in decision-DATE-NAME (default: the "
                    "gate set's name)")
    ap.add_argument("--junit", type=Path, default=None, metavar="FILE",
                    help="also write the checks as JUnit XML (one test case per check)")
    ap.add_argument("--comment", type=Path, default=None, metavar="FILE",
                    help="also write a pull-request comment body (a hidden marker naming "
                    "the study first; cut to GitHub's 65,536 characters)")
    ap.add_argument("--question", default=None, metavar="TEXT", help="the question decided "
                    "(default: the first heading of the study's README.md)")
    add_pairing_options(
        ap, set_help="change one compare setting (n_bootstrap, seed, min_slice_n, ...)",
        case_help="decide on the cases both runs have (the record says so)",
        version_help="go on when metric versions differ; gates on those rows fail",
        incomplete_help="accept a run that did not finish")
    return ap


def split_gate_args(argv: list[str]) -> tuple[str, list[str], list[str]]:
    """``gates=NAME`` and ``gates.FIELD=VALUE`` (``+gates.FIELD=VALUE`` adds a field the
    set does not have, e.g. ``+gates.min_kappa.faithfulness=0.6``) tokens apart from the
    rest."""
    name, overrides, rest = "default", [], []
    for tok in argv:
        if tok.startswith("gates="):
            name = tok.split("=", 1)[1]
        elif tok.startswith(("gates.", "+gates.")) and "=" in tok:
            overrides.append(tok)
        else:
            rest.append(tok)
    return name, overrides, rest


def study_question(study: Path) -> str | None:
    """The first Markdown heading of the study's README.md, if any."""
    readme = study / "README.md"
    if not readme.is_file():
        return None
    for line in readme.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("#"):
            text = line.lstrip("#").strip()
            if text:
                return text
    return None


def main(argv: list[str]) -> None:
    gate_name, gate_overrides, rest = split_gate_args(argv)
    args = _parser().parse_args(rest)
    from raglab.compare.comparison import VersionMismatch
    from raglab.errors import UserError

    try:
        code = decide(args, gate_name, gate_overrides)
    except VersionMismatch as e:
        _fail(str(e), 3)
    except UserError as e:
        _fail(str(e), 2)
    sys.stdout.flush()
    sys.exit(code)


def decide(args, gate_name: str, gate_overrides: list[str]) -> int:
    import datetime

    from raglab.commands.common import write_outputs
    from raglab.commands.compare import check_uri, settings
    from raglab.compare.comparison import compare_runs, load_run
    from raglab.compare.decide import evaluate_gates, not_worse_tests, run_means, settle_bases
    from raglab.compare.gates import load_gate_set
    from raglab.compare.kappa import calibration_checks
    from raglab.compare.load import safe_name
    from raglab.compare.record import build_record, render_record
    from raglab.compare.trust import attach
    from raglab.data.io import json_text
    from raglab.errors import UserError

    if not gate_name:
        raise UserError("gates=NAME: a gate set name or a YAML file is required")
    check_uri(args.uri)
    name_of_set, gates, source = load_gate_set(gate_name, gate_overrides,
                                               _gates_root(gate_name))
    study = args.study
    if study.exists() and not study.is_dir():
        raise UserError(f"--study {study}: not a directory")
    cfg = settings(args.adjust, args.set).model_copy(
        update={"confidence": gates.confidence, "alpha": gates.alpha})
    base = load_run(args.baseline, args.uri)
    cand = load_run(args.candidate, args.uri)
    from raglab.sequential.decide import check_pair, refuse_clusters, summary_of

    sequential = summary_of(cand) is not None  # a subset of the cases, by design
    check_pair(base, cand, args.allow_case_mismatch, args.allow_incomplete)
    comp = compare_runs(base, cand, cfg,
                        allow_case_mismatch=args.allow_case_mismatch or sequential,
                        allow_version_mismatch=args.allow_version_mismatch,
                        allow_incomplete=args.allow_incomplete)
    if sequential:
        refuse_clusters(comp)
    attach(comp, args.uri)  # each graded family's calibration (docs/calibration.md)
    from raglab.compare.decide import check_ppi_gates

    check_ppi_gates(comp, gates, source)  # estimator: ppi without usable labels: one line
    results = evaluate_gates(comp.rows, gates, run_means(base.metrics, cand.metrics),
                             not_worse_tests(comp, gates), ppi=comp.ppi,
                             bases=settle_bases(comp, gates))
    seq_line = None
    if sequential:
        from raglab.sequential.decide import on_sequence

        seq_line = on_sequence(results, gates, base, cand, f"gates={name_of_set}")
    results += calibration_checks(gates, results, comp.calibration,
                                  comp.versions.get("candidate"))
    date = datetime.date.today().isoformat()
    name = safe_name(args.name or name_of_set)
    question = args.question or study_question(study)
    same = same_run(base, cand)
    record = build_record(comp, gates, name_of_set, source, results, name=name, date=date,
                          question=question, base_dir=study,
                          project=Path.cwd(), gate_overrides=gate_overrides,
                          gate_shipped=_shipped(source),
                          extra_warnings=[w for w in (same, seq_line) if w])
    if sequential:  # what the run did, beside the warning that says it in words
        from raglab.sequential.decide import words

        summary = summary_of(cand) or {}
        record["sequential"] = {**{k: v for k, v in summary.items() if k != "checks"},
                                "settled": words(summary)}
    try:
        study.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        from raglab.errors import storage_error

        raise storage_error(e, "the study folder (--study)", study) from None
    from raglab.compare.record_html import markdown_html
    from raglab.compare.study import INDEX, free_stem, index_text

    stem = free_stem(study, date, name)  # a second decision of the day never replaces one
    record["written_at"] = datetime.datetime.now(datetime.UTC).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")
    md_text = render_record(record)
    paths = write_outputs(study.resolve(), {
        f"{stem}.json": json_text(record, indent=1, default=str),
        f"{stem}.md": md_text,
        f"{stem}.html": markdown_html(f"Decision {record['decision']}: {name}", md_text)})
    write_outputs(study.resolve(), {INDEX: index_text(study.resolve())})
    print(_terminal(record))
    # the study's path is the user's: one line, as the terminal shows it (docs/ci.md)
    print(term(f"wrote {paths[1]}, {paths[0].name} and {paths[2].name}; index {INDEX}"))
    hand_over(args, record, md_text, stem)
    if cand.mlflow_run_id and cand.tracking_uri:
        from raglab.tracking.results import log_decision

        log_decision(cand.mlflow_run_id, cand.tracking_uri, record["decision"],
                     record["gates"]["name"], paths,
                     base.mlflow_run_id or str(base.run_dir))
        print(term(f"MLflow run {cand.mlflow_run_id}: tags raglab.decision="
                   f"{record['decision']}, raglab.decision.gates={record['gates']['name']}, "
                   "artifacts decision/"))
    return EXIT_CODES[record["decision"]]



def hand_over(args, record: dict, md_text: str, stem: str) -> None:
    """The verdict where the release happens: ``--junit``, ``--comment`` and, on GitHub
    Actions (``GITHUB_STEP_SUMMARY`` set), the job summary and one ``::error`` per failed
    check (docs/ci.md). Every line printed is one line whatever a path or slice value
    holds (controls shown as by :func:`raglab.text.escape.term`), so none of the user's
    text can start a workflow command."""
    import os

    from raglab.compare.ci import comment_body, error_annotations, junit_xml, summary_markdown
    from raglab.data.io import atomic_write_text

    outputs = []
    if args.junit is not None:
        outputs.append((args.junit, junit_xml(record), "--junit"))
    if args.comment is not None:
        outputs.append((args.comment, comment_body(record, md_text, args.study.as_posix()),
                        "--comment"))
    for path, text, what in outputs:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text)
        except OSError as e:
            from raglab.errors import storage_error

            raise storage_error(e, what, path) from None
        print(term(f"wrote {path}"))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as fh:  # appended: other steps' too
                fh.write(summary_markdown(record, stem) + "\n")
        except OSError as e:
            from raglab.errors import storage_error

            raise storage_error(e, "GITHUB_STEP_SUMMARY", Path(summary)) from None
        for line in error_annotations(record):
            print(line)


def _shipped(source: str) -> bool:
    """A gate set of raglab's own configs (``gates=NAME``), not a file of the project."""
    return Path(source).resolve().is_relative_to(conf_dir().resolve())


def same_run(base, cand) -> str | None:
    """The warning of a decision whose baseline and candidate are one run (the same run
    directory or MLflow run id): every difference is then zero, and GO says nothing."""
    if base.mlflow_run_id or cand.mlflow_run_id:
        same = base.mlflow_run_id == cand.mlflow_run_id
    else:
        same = Path(base.run_dir).resolve() == Path(cand.run_dir).resolve()
    if not same:
        return None
    return (f"BASELINE and CANDIDATE are the same run ({base.label}): every difference is "
            "zero, so this decision says nothing about a change")


def _terminal(record: dict) -> str:
    lines = [f"raglab decide: {record['baseline']['label']} -> {record['candidate']['label']} "
             f"(gates {record['gates']['name']})"]
    for w in record["warnings"]:
        lines.append(f"  warning: {w}")
    for r in record["results"]:
        where = "overall" if not r["slice"] else f"{r['slice']['key']}={r['slice']['value']}"
        lines.append(f"  {r['status'].upper():12}  {r['gate']} [{where}]: {r['requirement']}"
                     f" -- {r['reason']}")
    from raglab.compare.record import inconclusive_note

    note = inconclusive_note(record)
    if note:
        lines.append(f"  note: {note}")
    if record.get("turns_on"):
        from raglab.compare.record import verdict_note

        lines.append(f"  note: {verdict_note(record['turns_on'])}")
    lines.append(f"decision: {record['decision']}")
    return "\n".join(term(line) for line in lines)  # tag values may hold escapes


def _gates_root(name: str) -> Path:
    """The config folder of ``gates=NAME``: the shipped one, else the working directory's
    ``conf/`` (on the config search path, as for runs) when it holds ``gates/NAME.yaml``."""
    shipped = conf_dir()
    own = Path("conf").resolve()
    if not (shipped / "gates" / f"{name}.yaml").is_file() \
            and (own / "gates" / f"{name}.yaml").is_file():
        return own
    return shipped
