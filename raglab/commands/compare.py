"""``raglab compare BASELINE CANDIDATE`` and ``raglab compare SWEEP --baseline JOB``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from raglab.commands.common import conf_dir, fresh_out, write_outputs
from raglab.commands.common import fail as _fail

DESCRIPTION = """Paired, per-slice comparison of a candidate run with a baseline run (run
directories or MLflow run ids), or of every job of a sweep (a Hydra multirun directory or an
MLflow parent run id) with one of its jobs. Writes compare.md, compare.html and compare.json.
Exit 0 done, 2 usage or input error, 3 metric versions differ."""

EPILOG = """examples:
  raglab compare outputs/k3 outputs/k10
  raglab compare 0f3c...e1 9a1b...77 --uri sqlite:///mlflow.db
  raglab compare multirun/2026-12-01/10-00-00 --baseline chunker.size=128,k=3
settings default to conf/compare/default.yaml; --set KEY=VALUE changes one
(e.g. --set min_slice_n=30)."""


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="raglab compare", description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", metavar="RUN",
                    help="BASELINE CANDIDATE, or one SWEEP with --baseline")
    ap.add_argument("--baseline", metavar="JOB", help="the sweep's baseline job: its number, "
                    "its name (e.g. chunker.size=128,k=3) or its MLflow run id")
    ap.add_argument("--out", type=Path, metavar="DIR", help="output directory (default: "
                    "compare-BASE-CAND/ next to the candidate run; for a sweep "
                    "SWEEP/compare-vs-JOB/, numbered -2, -3, ... when it holds a comparison "
                    "already); a DIR that holds one is refused, never replaced")
    add_pairing_options(
        ap, set_help="change one compare setting (alpha, confidence, n_bootstrap, seed, "
        "min_slice_n, max_flipped, flip_thresholds.METRIC)",
        case_help="compare the cases both runs have (says so at the top)",
        version_help="compare runs whose metric versions differ; those rows are marked "
        "not comparable",
        incomplete_help="compare a run that did not finish (killed, failed, missing cases)")
    return ap


def add_pairing_options(ap: argparse.ArgumentParser, *, set_help: str, case_help: str,
                        version_help: str, incomplete_help: str) -> None:
    """The options ``compare`` and ``decide`` share: where run ids are read, the p-value
    adjustment, compare settings and the three refusals that can be overridden (each
    command says in its own words what the override does)."""
    ap.add_argument("--uri", default=None, metavar="URI", help="MLflow tracking URI for run "
                    "ids (default: sqlite:///mlflow.db in the current directory); also where "
                    "calibrations are looked for when a run directory's cache_dir has none")
    ap.add_argument("--adjust", choices=("holm", "bh"), help="p-value adjustment across the "
                    "metric x slice family (default: holm)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=set_help)
    ap.add_argument("--allow-case-mismatch", action="store_true", help=case_help)
    ap.add_argument("--allow-version-mismatch", action="store_true", help=version_help)
    ap.add_argument("--allow-incomplete", action="store_true", help=incomplete_help)


#: the tracking URI schemes --uri accepts (those MLflow has a store for)
URI_SCHEMES = ("sqlite", "http", "https", "file", "databricks", "postgresql", "postgres",
               "mysql", "mssql", "oracle")


def check_uri(uri: str | None) -> None:
    """A --uri whose scheme MLflow has no store for is one line (exit 2), before any run
    is read."""
    if uri is None:
        return
    from raglab.errors import UserError
    from raglab.tracking.uris import redact_uri, scheme_of

    scheme = scheme_of(uri)
    if not uri.strip() or (scheme and scheme not in URI_SCHEMES and len(scheme) > 1):
        raise UserError(f"--uri {redact_uri(uri)!r}: not an MLflow tracking URI (schemes: "
                        f"{', '.join(URI_SCHEMES[:4])}, a database URL; e.g. "
                        "sqlite:///mlflow.db or http://127.0.0.1:5000)")


def settings(adjust: str | None, sets: list[str]):
    """The CompareCfg: conf/compare/default.yaml, then --adjust and --set."""
    from pydantic import ValidationError

    from raglab.compare.config import CompareCfg
    from raglab.data.yaml_io import load_yaml, load_yaml_file
    from raglab.errors import UserError

    data = load_yaml_file(conf_dir() / "compare" / "default.yaml") or {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--set {item!r}: expected KEY=VALUE")
        parsed = load_yaml(value, f"--set {key}") if value else None
        if key.startswith("flip_thresholds."):
            data.setdefault("flip_thresholds", {})[key.split(".", 1)[1]] = parsed
        else:
            data[key] = parsed
    if adjust:
        data["adjust"] = adjust
    try:
        return CompareCfg.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise UserError(f"compare setting {loc}: "
                        f"{'unknown key' if err['type'] == 'extra_forbidden' else err['msg']}") \
            from None


def main(argv: list[str]) -> None:
    args = _parser().parse_args(argv)
    from raglab.compare.comparison import VersionMismatch
    from raglab.errors import UserError

    try:
        check_uri(args.uri)
        if args.baseline is not None:
            if len(args.runs) != 1:
                raise UserError("--baseline goes with one SWEEP (a multirun directory or an "
                                "MLflow parent run id), not with two runs")
            from raglab.commands.compare_sweep import run_sweep

            run_sweep(args, settings(args.adjust, args.set))
        else:
            if len(args.runs) != 2:
                raise UserError("expected BASELINE CANDIDATE (two runs), or SWEEP --baseline JOB")
            run_pair(args, settings(args.adjust, args.set))
    except VersionMismatch as e:
        _fail(str(e), 3)
    except UserError as e:
        _fail(str(e), 2)


def default_out(base, cand) -> Path:
    from raglab.compare.load import safe_name

    where = cand.run_dir.parent if cand.mlflow_run_id is None else (
        cand.origin_dir.parent if cand.origin_dir is not None else Path.cwd())
    return where / f"compare-{safe_name(base.label)}-{safe_name(cand.label)}"


def run_pair(args, cfg) -> None:
    from raglab.compare.comparison import compare_runs, load_run
    from raglab.compare.render import render_md, render_terminal
    from raglab.compare.render_html import render_html
    from raglab.compare.trust import attach
    from raglab.data.io import json_text
    from raglab.text.escape import term

    base = load_run(args.runs[0], args.uri)
    cand = load_run(args.runs[1], args.uri)
    comp = compare_runs(base, cand, cfg, allow_case_mismatch=args.allow_case_mismatch,
                        allow_version_mismatch=args.allow_version_mismatch,
                        allow_incomplete=args.allow_incomplete)
    attach(comp, args.uri)  # each graded family's calibration (docs/calibration.md)
    out = fresh_out(args.out, default_out(base, cand))  # never a silent replace
    comp.paths = (out, Path.cwd())  # paths in the files: relative, inside the project only
    files = {"compare.md": render_md(comp), "compare.html": render_html(comp),
             "compare.json": json_text(comp.to_json(), indent=1)}
    paths = write_outputs(out, files)
    print(render_terminal(comp))  # each line escaped: labels, slice values
    print(term(f"wrote {out}/compare.md, compare.html, compare.json"))  # --out: one line
    if cand.mlflow_run_id and cand.tracking_uri:
        from raglab.tracking.results import confirmatory_rows, log_comparison

        # the confirmatory figures when both runs are in MLflow (docs/mlflow.md)
        rows = confirmatory_rows(comp.rows) if base.mlflow_run_id else []
        ppi = comp.ppi if base.mlflow_run_id else None
        n = log_comparison(cand.mlflow_run_id, cand.tracking_uri, rows, paths,
                           tags={"raglab.compared_with": base.mlflow_run_id or str(base.run_dir)},
                           ppi=ppi)
        figures = f", {n} new or changed compare.* figures" if rows or ppi else ""
        print(f"logged to MLflow run {cand.mlflow_run_id} (artifacts compare/, tag "
              f"raglab.compared_with{figures})")
    sys.stdout.flush()
