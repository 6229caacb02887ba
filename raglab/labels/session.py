"""``raglab label RUN --review``: a person labels the sampled cases one at a time, in the
manner of ``raglab cases review``.

Each row of the labelling file is shown with what the metric needs (the question to answer,
a conversation's earlier messages, the case's question, the reference answer or the
nuggets, the answer, its claims and context passages), never the judge's verdict. Keys:
``y`` yes, ``p`` partial (metrics on a 0-1 scale), ``n`` no, ``s`` skip (asked again after
the rows not yet seen), ``b`` back (the row before, to change its label), ``q`` quit. After
every key the labelling file is rewritten (atomically) with the label in its row, and the
label is stored with the run (``labels/labels.jsonl``): stopping at any point, Ctrl-C
included, loses nothing, and running the command again goes on with the rows not yet
labelled. One session at a time per labelling file (the review lock of
:mod:`raglab.cases.lock`).
"""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

from raglab.cases.review import read_key
from raglab.data.io import atomic_write_text, iter_json_lines
from raglab.errors import UserError
from raglab.labels.store import StoredLabel, label_value, labelled_spec, now, store_labels
from raglab.text.escape import term

KEYS = {"y": "yes", "p": "partial", "n": "no"}
#: families whose labels judge the answer against its context passages (shown in full)
CONTEXT_FAMILIES = ("faithfulness", "citations")


class Session:
    def __init__(self, run_dir: Path, path: Path):
        self.run_dir, self.path = run_dir, path
        self.rows: list[dict[str, Any]] = []
        for lineno, obj in iter_json_lines(path, "labelling file"):
            cid, metric = obj.get("case_id"), obj.get("metric")
            if not isinstance(cid, str) or not isinstance(metric, str):
                raise UserError("not a labelling row (case_id and metric)", file=str(path),
                                line=lineno, case_id=cid if isinstance(cid, str) else None)
            try:
                spec = labelled_spec(metric)
                label_value(obj.get("label"), spec)
            except (UserError, ValueError) as e:
                raise UserError(getattr(e, "message", None) or str(e), file=str(path),
                                line=lineno, case_id=cid) from None
            if not isinstance(obj.get("answer_sha256"), str) \
                    or not isinstance(obj.get("metric_version"), str):
                raise UserError("a labelling row without answer_sha256 and metric_version "
                                "(write the file with raglab label RUN --n N --metrics M)",
                                file=str(path), line=lineno, case_id=cid)
            self.rows.append(obj)
        self.fancy = sys.stdout.isatty()
        self.stored = 0

    # -- saving --------------------------------------------------------------------------
    def save(self) -> None:
        atomic_write_text(self.path, "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                             for r in self.rows))

    def label(self, row: dict[str, Any], word: str) -> None:
        """The label in the row and in the run's store (the file first: it is the
        session's progress; storing the same label again is harmless)."""
        row["label"] = word
        row.pop("skipped", None)
        self.save()
        value = label_value(word, labelled_spec(row["metric"]))
        assert value is not None
        store_labels(self.run_dir, [StoredLabel(row["case_id"], row["metric"], value,
                                                row["answer_sha256"], row["metric_version"],
                                                now(), "terminal")])
        self.stored += 1

    def skip(self, row: dict[str, Any]) -> None:
        row["skipped"] = True
        self.save()

    # -- showing -------------------------------------------------------------------------
    def show(self, row: dict[str, Any], pos: int, total: int) -> None:
        width = max(60, min(shutil.get_terminal_size((100, 40)).columns, 120))
        spec = labelled_spec(row["metric"])
        done = sum(1 for r in self.rows if r.get("label") is not None)
        out = ["\033[2J\033[H"] if self.fancy else []

        def wrap(label: str, text: Any, indent: int | None = None) -> list[str]:
            flat = " ".join(str(text).split()) if text is not None else text
            return textwrap.wrap(f"{label}{term(flat)}", width, break_on_hyphens=False,
                                 subsequent_indent=" " * (len(label) if indent is None
                                                          else indent)) or [label]

        out.append(f"row {pos} of {total} this session: case {term(row['case_id'])}  "
                   f"metric {term(row['metric'])}  ({done} of {len(self.rows)} labelled)")
        out += wrap("label:     ", row.get("ask") or spec.meaning)
        for m in row.get("history") or []:  # a conversation's turn: the turns before it
            if isinstance(m, dict):
                out += wrap(f"  earlier {m.get('role')}: ", m.get("content"), 4)
        out += wrap("question:  ", row.get("question") or "(not in the cases file)")
        if spec.family in ("correctness",) or row.get("reference"):
            out += wrap("reference: ", row.get("reference") or "(none)")
        for n in row.get("nuggets") or []:
            out += wrap("  nugget " + ("(vital) " if n.get("vital") else "(extra) "),
                        n.get("text"))
        out += wrap("answer:    ", row.get("answer") or "(empty)")
        for i, claim in enumerate(row.get("claims") or []):
            out += wrap(f"  claim {i + 1}: ", claim)
        passages = row.get("context") or []
        if spec.family in CONTEXT_FAMILIES:
            for i, p in enumerate(passages):
                out += wrap(f"  [{i + 1}] {term(p.get('doc_id'))}: ", p.get("text"), 6)
        else:
            out.append(f"context: {len(passages)} passage(s), in the labelling file")
        if row.get("label") is not None:
            out.append(f"labelled before: {term(row['label'])}")
        print("\n".join(out), flush=True)

    def prompt(self, row: dict[str, Any]) -> str:
        binary = labelled_spec(row["metric"]).kind == "binary"
        return ("[y]es  " + ("" if binary else "[p]artial  ")
                + "[n]o  [s]kip  [b]ack  [q]uit > ")

    # -- the session ---------------------------------------------------------------------
    def run(self) -> int:
        todo = [r for r in self.rows if r.get("label") is None and not r.get("skipped")]
        todo += [r for r in self.rows if r.get("label") is None and r.get("skipped")]
        if not todo:
            print(f"nothing to label in {self.path}: every row has a label")
            return 0
        pos = 0
        while pos < len(todo):
            row = todo[pos]
            self.show(row, pos + 1, len(todo))
            key = read_key(self.prompt(row))
            if key in KEYS:
                if key == "p" and labelled_spec(row["metric"]).kind == "binary":
                    print(f"{row['metric']} is pass/fail: yes or no")
                    continue
                self.label(row, KEYS[key])
            elif key == "s":
                self.skip(row)
            elif key == "b":
                pos = max(0, pos - 1)
                continue
            elif key == "q":
                break
            else:
                continue
            pos += 1
        return 0

    def summary(self) -> str:
        done = sum(1 for r in self.rows if r.get("label") is not None)
        skipped = sum(1 for r in self.rows if r.get("label") is None and r.get("skipped"))
        return (f"{done} of {len(self.rows)} rows labelled ({skipped} skipped); progress "
                f"saved in {self.path}, labels stored in "
                f"{self.run_dir / 'labels' / 'labels.jsonl'}")


def review(run_dir: Path, path: Path) -> Session:
    """The labelling session of ``path`` (the caller holds its lock); Ctrl-C ends it with
    every label so far saved."""
    session = Session(run_dir, path)
    try:
        session.run()
    except KeyboardInterrupt:
        print("\nstopped; every label so far is saved")
    return session
