"""The faithfulness labels of this study, as one reader decided them, written as the files
`raglab label RUN --from FILE` reads (labels-k5.jsonl, labels-k3.jsonl).

Each row of a run's labelling file (RUN/labels/to-label.jsonl, drawn by
`raglab label runs/k5 runs/k3 --n 60 --metrics faithfulness --seed 7`) was read in the
file's order: the question, the answer, its claims and the context passages. The question
asked of every row: "Is every claim of the answer supported by the context passages?"
(yes: all, partial: some, no: none). The judge's verdicts and per-case metric values were
not looked at before or while labelling.

Reading rules, decided before the first row and kept throughout:
- A claim is supported when a context passage states what it says. A claim that is a
  fragment of a passage's sentence (cut at a chunk boundary) is supported when what it does
  say is in the passage; an incomplete fragment is not thereby unsupported.
- Faithfulness is not relevance: a supported claim that does not answer the question
  (the UK base URL for a question about the EU) is still supported.
- A claim stated as a current fact is not supported when the passages say that fact was
  replaced (an old limit given as the limit, beside a passage that says it was replaced).

Usage (from the repository root, after the sample is drawn; the files written here are the
committed record, reproduce.sh only reads them):
    python experiments/labels/record_labels.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Every row of the labelling files is listed: a case left out stops the script.
YES = "yes"
DECISIONS: dict[str, dict[str, tuple[str, str]]] = {
    # base: chunker=fixed chunker.size=64, k=5 (38 rows: the other 22 sampled cases are
    # abstentions, where faithfulness does not apply)
    "k5": {
        "b-0019": (YES, "both claims verbatim in passage 1"),
        "b-0017": (YES, "both limits stated in passage 1"),
        "a-0011": (YES, "passages 1 and 2"),
        "a-0056": (YES, "claim 2 is a fragment of the same sentence; passage 2 states it"),
        "a-0055": (YES, "passages 1 and 2"),
        "b-0072": (YES, "UK and EU base URLs both stated (the UK one does not answer the "
                        "EU question, but it is supported)"),
        "a-0092": (YES, "EU and UK add-on user prices, each in its own pricing passage; "
                        "neither answers the US question"),
        "a-0004": (YES, "passage 1"),
        "a-0053": (YES, "passage 1"),
        "a-0060": (YES, "a fragment and the full sentence, both in passages 1-2"),
        "b-0101": (YES, "warranty sentences, verbatim; off the question, still supported"),
        "a-0080": (YES, "claim 2 cut off mid-sentence; what it says is in passage 1"),
        "b-0044": (YES, "two sentences merged into one claim; each half in a passage"),
        "b-0085": (YES, "fee in passage 1; the waiver fragment completed in passage 3"),
        "a-0071": (YES, "passage 3"),
        "a-0001": (YES, "passage 1"),
        "a-0025": (YES, "passage 1"),
        "a-0068": (YES, "passage 5 (the March 2026 cut-off)"),
        "b-0081": (YES, "passage 1"),
        "a-0105": (YES, "two fragments of passage 2's sentence"),
        "b-0049": (YES, "passages 1 and 3"),
        "b-0048": (YES, "passages 1 and 2"),
        "a-0072": (YES, "passage 4"),
        "a-0098": (YES, "passage 1; off the question, still supported"),
        "b-0028": (YES, "passages 1 and 2"),
        "c-0003": (YES, "passage 3; off the question, still supported"),
        "b-0050": ("partial", "claim 2 (120 per minute as of 3 March 2026) is supported; "
                              "claim 1 gives 60 per minute per app per shop as the limit, "
                              "which passage 5 says was replaced by 120"),
        "b-0026": (YES, "passages 2 and 3"),
        "b-0074": (YES, "a full sentence and its fragment, passages 1 and 2"),
        "b-0055": (YES, "passage 1"),
        "b-0007": (YES, "the fragment and the full sentence, passages 3 and 5"),
        "a-0061": (YES, "passage 4"),
        "b-0046": (YES, "passages 1 and 2"),
        "a-0075": (YES, "passages 1 and 2"),
        "b-0030": (YES, "passage 1; off the question, still supported"),
        "b-0078": (YES, "fragment and full sentence, passages 1 and 3"),
        "a-0064": (YES, "passage 1"),
        "a-0069": (YES, "passages 3 and 4"),
    },
    # candidate: the same with k=3 (35 rows)
    "k3": {
        "b-0019": (YES, "passage 1"),
        "b-0017": (YES, "passage 1"),
        "a-0011": (YES, "passages 1 and 2"),
        "a-0056": (YES, "passages 1 and 2"),
        "a-0055": (YES, "passages 1 and 2"),
        "b-0072": (YES, "passages 1 and 2"),
        "a-0092": (YES, "passages 1 and 2; off the question, still supported"),
        "a-0004": (YES, "passage 1"),
        "a-0053": (YES, "passage 1"),
        "a-0060": (YES, "passages 1 and 2"),
        "b-0101": (YES, "passages 1 and 2; off the question, still supported"),
        "a-0080": (YES, "claim 2 cut off mid-sentence; what it says is in passage 1"),
        "b-0044": (YES, "two sentences merged into one claim; passages 1-3"),
        "b-0085": (YES, "passages 1-3"),
        "a-0071": (YES, "passage 3"),
        "a-0001": (YES, "passage 1"),
        "a-0025": (YES, "passage 1"),
        "b-0081": (YES, "passage 1"),
        "a-0105": (YES, "passages 1-3 (a different answer from k=5)"),
        "b-0049": (YES, "passages 1 and 3"),
        "b-0048": (YES, "passages 1 and 2"),
        "a-0098": (YES, "passage 1; off the question, still supported"),
        "b-0028": (YES, "passages 1 and 2"),
        "c-0003": (YES, "passage 3; off the question, still supported"),
        "b-0050": (YES, "60 per minute per app per shop in passages 1-3; with three "
                        "passages nothing in the context says the limit changed"),
        "b-0026": (YES, "passages 2 and 3"),
        "b-0074": (YES, "passages 1 and 2"),
        "b-0055": (YES, "passage 1"),
        "b-0007": (YES, "passage 3 (a fragment)"),
        "b-0046": (YES, "passages 1 and 2"),
        "a-0075": (YES, "passages 1 and 2"),
        "b-0030": (YES, "passage 1; off the question, still supported"),
        "b-0078": (YES, "passages 1 and 3"),
        "a-0064": (YES, "passage 1"),
        "a-0069": (YES, "passage 3"),
    },
}


def main() -> int:
    for run, decided in DECISIONS.items():
        sheet = HERE / "runs" / run / "labels" / "to-label.jsonl"
        rows = [json.loads(line) for line in sheet.read_text(encoding="utf-8").splitlines()
                if line.strip()]
        ids = [r["case_id"] for r in rows]
        if sorted(ids) != sorted(decided):
            print(f"{sheet}: rows and decisions differ: "
                  f"{sorted(set(ids) ^ set(decided))}", file=sys.stderr)
            return 2
        out = HERE / f"labels-{run}.jsonl"
        tmp = out.with_suffix(".jsonl.tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for r in rows:  # the labelling file's (random) order
                label, note = decided[r["case_id"]]
                fh.write(json.dumps({
                    "case_id": r["case_id"], "metric": r["metric"], "label": label,
                    "answer_sha256": r["answer_sha256"], "metric_version": r["metric_version"],
                    "note": note}) + "\n")
        tmp.replace(out)
        print(f"{out.name}: {len(rows)} labels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
