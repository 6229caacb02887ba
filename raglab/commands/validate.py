"""``raglab validate [overrides]``: schema, duplicate ids, gold quotes; quarantine.jsonl."""

from __future__ import annotations

import sys
from pathlib import Path

from raglab.commands.common import fail

HELP = """usage: raglab validate [overrides]

Checks the dataset chosen by the config (the demo by default; dataset.corpus=PATH
dataset.cases=PATH [dataset.labels=PATH] for your own): schema, duplicate ids, every gold
quote located in its document (exact after normalisation, else fuzzy >= dataset.fuzzy_threshold),
spans in range. Cases whose evidence is gone, or whose quote matches only with a changed
number, negation or name (changed_fact, both texts shown), are written to ./quarantine.jsonl.
Exit 0 when the set is clean and usable, 1 otherwise, 2 for input that cannot be read
(one line naming the file and line).
"""


def main(argv: list[str]) -> None:
    if any(a in ("-h", "--help") for a in argv):
        print(HELP)
        return
    from raglab.errors import UserError

    try:
        ds, weights = _load(argv)
    except UserError as e:  # the one place a user's mistake ends this command
        fail(str(e), 2)
    from raglab.data.dataset import summary_rows
    from raglab.data.io import write_jsonl
    from raglab.text.escape import term

    for w in ds.warnings:  # tag values, ids and quotes are the user's text: no escapes
        print(term(w), file=sys.stderr)
    for q in ds.quarantined:
        print(term(q.render()), file=sys.stderr)
    try:
        write_jsonl(Path("quarantine.jsonl"), [q.as_dict() for q in ds.quarantined])
    except UserError as e:  # e.g. a read-only working directory
        fail(str(e), 2)
    rows = summary_rows(ds)
    methods: dict[str, int] = {}
    for locs in ds.locations.values():
        for loc in locs:
            methods[loc.method] = methods.get(loc.method, 0) + 1
    print(f"corpus: {ds.corpus_path} ({len(ds.corpus)} documents)")
    print(f"cases:  {ds.cases_path} ({ds.n_cases_total} cases, {len(ds.cases)} usable, "
          f"{len(ds.quarantined)} quarantined)")
    if ds.labels_path:
        print(f"labels: {ds.labels_path} ({len(ds.labels)} human labels)")
    print("evidence located: " + ", ".join(f"{k} {v}" for k, v in sorted(methods.items())))
    if weights is not None:
        from raglab.data.weights import effective_size

        print(f"weighted: effective sample size {effective_size(list(weights.values())):.1f} "
              f"of {len(weights)} cases (case weights and dataset.weights)")
    rows = [(term(g), term(v), n) for g, v, n in rows]
    w = max((len(g) + len(v) for g, v, _ in rows), default=10) + 3
    print(f"\n{'group / value'.ljust(w)} cases")
    for g, v, n in rows:
        print(f"{(g + ' / ' + v).ljust(w)} {n}")
    print(f"\n{len(ds.warnings)} warnings, {len(ds.quarantined)} quarantined "
          f"(written to {Path('quarantine.jsonl').resolve()})")
    if not ds.usable or ds.quarantined:
        sys.exit(1)


def _load(argv: list[str]):
    from omegaconf import OmegaConf

    from raglab.commands.compose import compose
    from raglab.config import DatasetCfg, parse_section
    from raglab.data.dataset import load_dataset
    from raglab.data.weights import effective_weights

    cfg = compose(argv)
    dcfg = parse_section(DatasetCfg, OmegaConf.to_container(cfg.dataset, resolve=True),
                         "dataset")
    ds = load_dataset(dcfg.corpus, dcfg.cases, dcfg.labels, dcfg.fuzzy_threshold)
    # (no usable case: nothing to weigh; the quarantine is still written and reported)
    return ds, (effective_weights(ds.cases, dcfg.weights, str(ds.cases_path)) if ds.cases
                else None)
