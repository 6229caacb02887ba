"""Retrieval metrics agree with trec_eval (via pytrec_eval) per case, to 1e-9."""

import random

import pytest
import pytrec_eval  # pytrec-eval-terrier, in the test extra: missing is a failure, not a skip

from raglab.metrics.judging import GoldItem, judge_hits
from raglab.metrics.retrieval import ranked_list_metrics

CUTOFFS = [1, 3, 5, 10, 20]


def _random_query(rng: random.Random, qid: str):
    n_docs = rng.randint(5, 60)
    docs = [f"d{j}" for j in range(n_docs)]
    n_rel = rng.randint(1, min(8, n_docs))
    rel_docs = rng.sample(docs, n_rel)
    qrel = {d: rng.choice([1, 2, 3]) for d in rel_docs}
    # unjudged or non-relevant documents can be retrieved too
    depth = rng.randint(0, n_docs)
    ranking = rng.sample(docs, depth)
    return qrel, ranking


def test_agrees_with_trec_eval_on_random_cases():
    rng = random.Random(20261129)
    qrels, runs, ours = {}, {}, {}
    for q in range(300):
        qid = f"q{q}"
        qrel, ranking = _random_query(rng, qid)
        qrels[qid] = qrel
        # distinct descending scores so trec_eval keeps our order
        runs[qid] = {d: float(len(ranking) - r) for r, d in enumerate(ranking)}
        gold = [GoldItem(d, 0, 10, float(g), False, "x") for d, g in qrel.items()]
        doc_texts = {d: "0123456789" for d in set(ranking) | set(qrel)}
        hits = [{"doc_id": d, "text": ""} for d in ranking]  # whole documents
        holds = judge_hits(hits, gold, doc_texts)
        ours[qid] = ranked_list_metrics(holds, [g.grade for g in gold], CUTOFFS, "s")
    measures = {"recip_rank"} | {f"P_{k}" for k in CUTOFFS} | {f"recall_{k}" for k in CUTOFFS} \
        | {f"ndcg_cut_{k}" for k in CUTOFFS}
    trec = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(runs)
    checked = 0
    for qid, m in ours.items():
        t = trec.get(qid)
        if t is None:  # trec_eval skips queries with an empty ranking
            assert runs[qid] == {}
            assert m["s.mrr"] == 0.0 and m["s.evidence_recall@5"] == 0.0
            continue
        assert m["s.mrr"] == pytest.approx(t["recip_rank"], abs=1e-9)
        for k in CUTOFFS:
            assert m[f"s.precision@{k}"] == pytest.approx(t[f"P_{k}"], abs=1e-9), (qid, k)
            assert m[f"s.evidence_recall@{k}"] == pytest.approx(t[f"recall_{k}"], abs=1e-9)
            assert m[f"s.ndcg@{k}"] == pytest.approx(t[f"ndcg_cut_{k}"], abs=1e-9), (qid, k)
        checked += 1
    assert checked >= 200
