"""The reference process for the replay benchmark: parse the corpus, the cases and the
replayed outputs with ``json``, score the rankings with pytrec_eval (recall, P, nDCG at the
same cutoffs, reciprocal rank; document-level qrels from the gold evidence), write the
per-query results.

    python -m tests.benchmarks.trec_baseline CORPUS CASES OUTPUTS OUT_JSON
"""

from __future__ import annotations

import json
import sys

import pytrec_eval

CUTOFFS = (1, 3, 5, 10, 20, 50, 100)


def main(corpus: str, cases: str, outputs: str, out: str) -> None:
    with open(corpus, encoding="utf-8") as fh:
        docs = {d["doc_id"]: d for d in map(json.loads, fh)}
    qrels: dict[str, dict[str, int]] = {}
    with open(cases, encoding="utf-8") as fh:
        for case in map(json.loads, fh):
            rel = qrels.setdefault(case["id"], {})
            for ev in case.get("evidence", []):
                if ev["doc_id"] in docs:
                    rel[ev["doc_id"]] = max(rel.get(ev["doc_id"], 0), int(ev.get("grade", 1)))
    run: dict[str, dict[str, float]] = {}
    with open(outputs, encoding="utf-8") as fh:
        for o in map(json.loads, fh):
            ranked = run.setdefault(o["case_id"], {})
            for h in o["candidates"]:  # document level: a document's best score
                ranked[h["doc_id"]] = max(ranked.get(h["doc_id"], float("-inf")), h["score"])
    cut = ",".join(map(str, CUTOFFS))
    ev = pytrec_eval.RelevanceEvaluator(qrels, {f"recall.{cut}", f"P.{cut}",
                                                f"ndcg_cut.{cut}", "recip_rank"})
    res = ev.evaluate(run)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(res, fh)


if __name__ == "__main__":
    main(*sys.argv[1:5])
