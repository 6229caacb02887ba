"""``raglab cases from-run|from-traffic|add``: failures and traffic back into the set."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any, cast

from raglab.commands.common import fail

HELP = """usage: raglab cases from-run RUN_DIR --out FILE
       raglab cases from-traffic TRAFFIC --out FILE [--feedback VALUE] [--alerts ALERTS_JSON]
       raglab cases add FILE [overrides]
       raglab cases draft|review ... (raglab cases draft --help)

from-run      the failed cases of a run (those with a diagnosis: the run's "failed cases:
              N"; errors, evidence lost in retrieval or reranking, false refusals and
              answers, unsupported or contradicted answers, forbidden strings, answers
              wrong against the reference, ACL leaks) as drafts: the case with its labels,
              plus `draft` (answer, context, one reason per cause, diagnosis); a
              conversation's failing turns as one draft, the conversation up to the last
              of them
from-traffic  traffic lines (those with --feedback VALUE, e.g. down, and/or in a window
              of --alerts, the alerts.json of raglab monitor) as drafts without evidence,
              one per distinct question and filters, each marked needs_labels
add           validates labelled cases against the corpus and schema and appends them to
              dataset.cases (overrides as for raglab run), refusing duplicates (same id, or
              same normalised question and filters), drafts still marked needs_labels or
              needs_review,
              answerable cases without evidence and evidence not in the corpus; atomic:
              on any problem the set is left untouched (exit 2)
"""


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(HELP)
        return
    from raglab.errors import UserError

    sub, rest = argv[0], argv[1:]
    try:
        if sub == "from-run":
            _from_run(rest)
        elif sub == "from-traffic":
            _from_traffic(rest)
        elif sub == "add":
            _add(rest)
        else:
            fail(f"unknown subcommand {sub!r} (from-run, from-traffic, add; see raglab cases "
                 "--help)", 2)
    except UserError as e:
        fail(str(e), 2)


def _write(out: Path, drafts: list[dict], inputs: list[Path]) -> None:
    """Write the drafts (atomically), never over one of the command's inputs."""
    from raglab.data.io import refuse_inputs, write_jsonl

    refuse_inputs(out, [(p, "") for p in inputs], f"--out {out}",
                  "write the drafts to another file (then raglab cases add it)")
    write_jsonl(out, drafts)


def _from_run(argv: list[str]) -> None:
    from raglab.cases.drafts import drafts_from_run, run_inputs, torn_records

    ap = argparse.ArgumentParser(prog="raglab cases from-run")
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    run_dir = args.run_dir.resolve()
    drafts, n = drafts_from_run(run_dir)
    if torn_records(run_dir):
        print(f"raglab: warning: {run_dir / 'records.jsonl'} ends in a line cut short (the "
              "run was killed and not resumed): that case is left out; run the same command "
              "again in that run directory to finish it", file=sys.stderr)
    _write(args.out, drafts, run_inputs(run_dir))
    why = Counter(r.split(" (")[0].split(":")[0] for d in drafts for r in d["draft"]["reasons"])
    turns = sum(len(d["draft"].get("failing_turns") or ()) for d in drafts)
    failing = len(drafts) + turns - sum(1 for d in drafts if d["draft"].get("failing_turns"))
    print(f"{failing} failing case(s) of {n} written to {args.out}"
          + (f" ({turns} turns of conversations, each conversation one draft up to its last "
             "failing turn)" if turns else ""))
    for reason, k in why.most_common():
        print(f"  {k:4d}  {reason}")
    unlabelled = sum(1 for d in drafts if d.get("needs_labels"))
    if unlabelled:
        print(f"{unlabelled} draft(s) marked needs_labels (their case was not found)")


def _from_traffic(argv: list[str]) -> None:
    from raglab.cases.drafts import drafts_from_traffic, read_alerts
    from raglab.monitor.traffic import read_traffic

    ap = argparse.ArgumentParser(prog="raglab cases from-traffic")
    ap.add_argument("traffic", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--feedback", default=None, help="only lines with this feedback (e.g. down)")
    ap.add_argument("--alerts", type=Path, default=None,
                    help="only lines in an alerted window (raglab monitor's alerts.json)")
    args = ap.parse_args(argv)
    alerts = None
    if args.alerts is not None:
        alerts = read_alerts(args.alerts)
    traffic = read_traffic(args.traffic)
    drafts, picked = drafts_from_traffic(traffic, args.feedback, alerts)
    _write(args.out, drafts, [args.traffic, *([args.alerts] if args.alerts else [])])
    print(f"{len(drafts)} draft(s) from {picked} picked line(s) of {len(traffic.lines)} "
          f"written to {args.out}; each marked needs_labels")
    if traffic.bad:
        print(f"bad traffic lines: {traffic.n_bad} (first: {traffic.bad[0]})")


def _add(argv: list[str]) -> None:
    from omegaconf import OmegaConf
    from pydantic import ValidationError

    from raglab.cases.add import append_cases, check_new_cases
    from raglab.commands.compose import compose
    from raglab.config import DatasetCfg, config_error
    from raglab.data.dataset import PKG_PREFIX, resolve_path

    if any(a in ("-h", "--help") for a in argv):  # (was the usage error, exit 2)
        print(HELP)
        return
    files = [a for a in argv if "=" not in a and not a.startswith("-")]
    if len(files) != 1:
        fail("usage: raglab cases add FILE [overrides] (see raglab cases --help)", 2)
    path = Path(files[0])
    cfg = compose([a for a in argv if a is not files[0]])
    data = OmegaConf.to_container(cfg.dataset, resolve=True)
    try:
        dcfg = DatasetCfg.model_validate(data)
    except ValidationError as e:
        section = cast(dict[str, Any], data) if isinstance(data, dict) else {}
        fail(str(config_error(e, section, "dataset")), 2)
    if str(dcfg.cases).startswith(PKG_PREFIX):
        fail(f"dataset.cases is the shipped set ({dcfg.cases}), which is read-only: "
             "set dataset.cases=PATH (and dataset.corpus=PATH)", 2)
    cases_path = resolve_path(dcfg.cases)
    good, problems, warnings = check_new_cases(path, cases_path, resolve_path(dcfg.corpus),
                                               dcfg.fuzzy_threshold)
    for w in warnings:
        print(w, file=sys.stderr)
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        fail(f"{len(problems)} case(s) refused; nothing added to {cases_path}", 2)
    if not good:
        fail(f"{path}: no case to add", 2)
    from raglab.cases.add import n_cases

    total = append_cases(cases_path, good)
    n_conv = sum(1 for c in good if "turns" in c)
    turns = f" ({n_conv} conversation(s): {sum(n_cases(c) for c in good if 'turns' in c)} " \
        "turns)" if n_conv else ""
    print(f"added {sum(map(n_cases, good))} case(s){turns} to {cases_path} (now {total})")
