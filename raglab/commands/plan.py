"""``raglab plan BASELINE gates=NAME``: what a gate set can decide on a baseline's cases."""

from __future__ import annotations

import argparse
import sys

from raglab.commands.common import fail as _fail

DESCRIPTION = """Before anyone runs a candidate: for each check a gate set would make on the
baseline run's cases (run directory or MLflow run id), one line with the paired cases there
now, the smallest change its test detects with 80% power, and the cases the gate's margin
needs (raglab.compare.plan). The plan assumes a candidate that changes a share --changed of
the cases, as many for the better as for the worse (default 0: none; a candidate that changes
more cases needs more, one that improves may need fewer). Exit 0, 2 usage or input
error."""

EPILOG = """examples:
  raglab plan runs/base gates=default
  raglab plan runs/base gates=ci/gates.yaml --changed 0.1
  raglab plan 0f3c...e1 gates=default --uri sqlite:///mlflow.db"""


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="raglab plan", description=DESCRIPTION, epilog=EPILOG,
        usage="raglab plan BASELINE gates=NAME [gates.FIELD=VALUE ...] [--changed SHARE] "
              "[--uri URI] [--allow-incomplete]",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("baseline", metavar="BASELINE", help="run directory or MLflow run id")
    ap.add_argument("--changed", type=float, default=0.0, metavar="SHARE",
                    help="share of cases the candidate is expected to change, half each way "
                    "(default 0)")
    ap.add_argument("--uri", default=None, metavar="URI", help="MLflow tracking URI for a run "
                    "id (default: sqlite:///mlflow.db in the current directory)")
    ap.add_argument("--allow-incomplete", action="store_true",
                    help="plan on a run that did not finish")
    return ap


def main(argv: list[str]) -> None:
    from raglab.commands.decide import split_gate_args

    gate_name, gate_overrides, rest = split_gate_args(argv)
    args = _parser().parse_args(rest)
    from raglab.errors import UserError

    try:
        plan(args, gate_name, gate_overrides)
    except UserError as e:
        _fail(str(e), 2)
    sys.stdout.flush()


def plan(args, gate_name: str, gate_overrides: list[str]) -> None:
    import math

    from raglab.commands.compare import check_uri, settings
    from raglab.commands.decide import _gates_root
    from raglab.compare.comparison import load_run
    from raglab.compare.gates import load_gate_set
    from raglab.compare.plan import plan_checks, plan_lines
    from raglab.compare.table import pair_runs
    from raglab.errors import UserError

    if not math.isfinite(args.changed) or not 0.0 <= args.changed <= 1.0:
        raise UserError(f"--changed {args.changed:g}: a share of the cases, from 0 to 1")
    check_uri(args.uri)
    name, gates, _ = load_gate_set(gate_name, gate_overrides, _gates_root(gate_name))
    base = load_run(args.baseline, args.uri)
    cfg = settings(None, []).model_copy(update={"confidence": gates.confidence,
                                                "alpha": gates.alpha})
    table = pair_runs(base, base, cfg, allow_incomplete=args.allow_incomplete)
    checks = plan_checks(table, gates, args.changed)
    lines = [f"raglab plan: {base.label} (gates {name}): {len(table.ids)} cases"]
    lines += plan_lines(checks, gates, args.changed)
    if table.clusters is not None:  # conversations: decide resamples them, not the turns
        from raglab.compare.table import clustering, untagged_clusters

        alone = untagged_clusters(table.clusters)  # (single-turn cases beside the turns)
        said = clustering(table.cfg.cluster, len(set(table.clusters)), alone) or ""
        lines.append(f"  (the plan treats the {len(table.ids)} {'cases' if alone else 'turns'} "
                     "as independent cases; "
                     f"decide {said.replace('clustered', 'clusters them', 1)}, so it may "
                     "need more)" if table.cfg.cluster == "conversation" else
                     f"  (the plan treats the {len(table.ids)} cases as independent; decide "
                     f"is {said}, so it may need more)")
    from raglab.text.escape import term

    print("\n".join(term(line) for line in lines))
