"""``raglab compare SWEEP --baseline JOB``: every job of a sweep against one of its jobs."""

from __future__ import annotations

import sys
from pathlib import Path

from raglab.metrics.catalog import SWEEP_TERMINAL


def run_sweep(args, cfg) -> None:
    from raglab.compare.load import DEFAULT_TRACKING_URI
    from raglab.compare.sweep import (
        compare_sweep,
        find_job,
        load_sweep,
        resolve_baseline,
        sweep_out_dir,
        write_sweep_files,
    )
    from raglab.compare.sweep_render import render_sweep_terminal

    ref = args.runs[0]
    uri = args.uri or DEFAULT_TRACKING_URI
    # an MLflow parent's job numbers and values are in its tags: resolved before loading
    wanted = resolve_baseline(ref, uri, args.baseline) or args.baseline
    notes: list[str] = []
    jobs, params = load_sweep(ref, uri, notes)
    from raglab.text.escape import term

    for note in notes:
        print(f"note: {term(note)}", file=sys.stderr)
    base = find_job(jobs, wanted) if wanted is not None else jobs[0]
    if len(jobs) < 2:
        from raglab.errors import UserError
        raise UserError(f"the sweep {ref} has one job only: nothing to compare")
    sc = compare_sweep(ref, jobs, params, base, cfg,
                       allow_case_mismatch=args.allow_case_mismatch,
                       allow_version_mismatch=args.allow_version_mismatch,
                       allow_incomplete=args.allow_incomplete)
    sc.warnings[:0] = notes
    from raglab.commands.common import fresh_out

    out = fresh_out(args.out, sweep_out_dir(ref, base))  # never a silent replace
    sc.paths = (out, Path.cwd())  # paths in the files: relative, inside the project only
    paths = write_sweep_files(sc, out)
    from raglab.text.escape import term_lines

    print(term_lines(render_sweep_terminal(sc, list(SWEEP_TERMINAL))))
    print(f"wrote {out}/compare.md, compare.html, compare.json")
    if not Path(ref).is_dir():  # an MLflow parent run: the figures and the heat map on it
        from raglab.compare.sweep import log_to_parent

        n = log_to_parent(sc, ref, uri, paths)
        print(f"logged to MLflow parent run {ref} ({n} new or changed sweep.* figures, "
              "the family's p-values as family.*, artifacts compare/, tag raglab.sweep.baseline)")
