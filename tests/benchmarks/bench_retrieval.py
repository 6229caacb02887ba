"""Benchmark: scoring 10,000 cases x 100 candidates with raglab vs pytrec_eval, same process.

raglab: evidence judging (quote spans located in their documents, chunk hits with offsets)
plus every retrieval metric at three cutoffs. pytrec_eval: recall, MRR, nDCG and P at the
same cutoffs on the same rankings (document-level qrels). Prints the time ratio.

    python tests/benchmarks/bench_retrieval.py [--cases 10000] [--depth 100]
"""

from __future__ import annotations

import argparse
import gc
import random
import time

from raglab.metrics.judging import GoldItem, judge_hits
from raglab.metrics.retrieval import ranked_list_metrics
from raglab.text.normalize import locate_quote

CUTOFFS = [5, 10, 100]
WORDS = ("refund invoice payroll export card reader api token limit plan region tax report "
         "shift payslip ledger webhook rate batch terminal receipt").split()


def make_data(n_cases: int, depth: int, seed: int = 1):
    rng = random.Random(seed)
    n_docs = 2000
    docs = {f"d{i}": " ".join(rng.choice(WORDS) for _ in range(300)) for i in range(n_docs)}
    cases = []
    for _ in range(n_cases):
        gold_docs = rng.sample(range(n_docs), rng.randint(1, 3))
        gold = []
        for d in gold_docs:
            text = docs[f"d{d}"]
            s = rng.randrange(0, len(text) - 200)
            s = text.index(" ", s) + 1
            e = text.index(" ", s + 60)
            gold.append((f"d{d}", text[s:e], rng.choice([1, 2])))
        ranking = []
        pool = gold_docs + rng.sample(range(n_docs), depth)
        for r in range(depth):
            d = rng.choice(pool)
            st = rng.randrange(0, 1500)
            ranking.append({"doc_id": f"d{d}", "start": st, "end": st + 400,
                            "text": "", "score": float(depth - r)})
        cases.append((gold, ranking))
    return docs, cases


def run_raglab(docs, cases):
    t0 = time.perf_counter()
    located = {}
    for qi, (gold, _) in enumerate(cases):  # quote matching (once per evidence item)
        items = []
        for doc_id, quote, grade in gold:
            loc = locate_quote(quote, docs[doc_id])
            items.append(GoldItem(doc_id, loc.start, loc.end, float(grade), False, quote))
        located[qi] = items
    t_locate = time.perf_counter() - t0
    t1 = time.perf_counter()
    out = []
    for qi, (_, ranking) in enumerate(cases):
        items = located[qi]
        holds = judge_hits(ranking, items, docs)
        out.append(ranked_list_metrics(holds, [g.grade for g in items], CUTOFFS, "candidate"))
    t_score = time.perf_counter() - t1
    return out, t_locate, t_score


def run_trec(cases):
    """pytrec_eval fed from the same hit lists: (results, seconds with the conversion to its
    input format, seconds of RelevanceEvaluator + evaluate alone)."""
    import pytrec_eval

    t_start = time.perf_counter()
    qrels, runs = {}, {}
    for qi, (gold, ranking) in enumerate(cases):
        qrels[str(qi)] = {d: g for d, _, g in gold}
        run: dict[str, float] = {}
        for h in ranking:  # trec_eval ranks documents: keep each document's best score
            run.setdefault(h["doc_id"], h["score"])
        runs[str(qi)] = run
    measures = {"recip_rank"} | {f"{m}_{k}" for m in ("P", "recall", "ndcg_cut") for k in CUTOFFS}
    t0 = time.perf_counter()
    res = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(runs)
    t1 = time.perf_counter()
    return res, t1 - t_start, t1 - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    docs, cases = make_data(args.cases, args.depth)
    best_r, best_t, best_tc, best_loc, best_score = (float("inf"), float("inf"), float("inf"),
                                                     0.0, 0.0)
    for _ in range(args.repeat):  # interleaved, best of N: both measured in the same conditions
        gc.collect()
        _, t_loc, t_score = run_raglab(docs, cases)
        if t_loc + t_score < best_r:
            best_r, best_loc, best_score = t_loc + t_score, t_loc, t_score
        gc.collect()
        _, t_conv, t_trec = run_trec(cases)
        best_t = min(best_t, t_trec)
        best_tc = min(best_tc, t_conv)
    print(f"cases={args.cases} candidates={args.depth} cutoffs={CUTOFFS}")
    print(f"raglab (quote location {best_loc:.3f} s + judging and metrics {best_score:.3f} s): "
          f"{best_r:.3f} s")
    print(f"pytrec_eval (recall, MRR, nDCG, P), evaluate() alone: {best_t:.3f} s")
    print(f"pytrec_eval including conversion of the same hit lists to its input: {best_tc:.3f} s")
    print(f"ratio raglab / pytrec_eval evaluate() alone = {best_r / best_t:.2f}")
    print(f"ratio raglab / pytrec_eval with its input conversion = {best_r / best_tc:.2f}")


if __name__ == "__main__":
    main()
