"""Synthetic replay data for the whole-process benchmarks: corpus, cases, system outputs.

    python -m tests.benchmarks.replay_data DIR [--cases 2000] [--depth 100] [--slices 50]

Every case has one to three gold quotes taken from its documents; the replayed output has
``depth`` candidates (chunks with offsets and text) and the first five as context. Tags give
``slices`` slice values in all (three tag keys).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

WORDS = ("refund invoice payroll export card reader api token limit plan region tax report "
         "shift payslip ledger webhook rate batch terminal receipt").split()


def make(out: Path, n_cases: int, depth: int = 100, n_slices: int = 50, seed: int = 1,
         n_docs: int = 2000) -> dict[str, Path]:
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    docs = {f"d{i}": " ".join(rng.choice(WORDS) for _ in range(300)) for i in range(n_docs)}
    paths = {"corpus": out / "corpus.jsonl", "cases": out / "cases.jsonl",
             "outputs": out / "outputs.jsonl"}
    with open(paths["corpus"], "w", encoding="utf-8") as fh:
        for d, text in docs.items():
            fh.write(json.dumps({"doc_id": d, "text": text}) + "\n")
    # three tag keys whose values add up to n_slices slices
    a = max(1, n_slices // 2)
    b = max(1, (n_slices - a) * 2 // 3)
    c = max(1, n_slices - a - b)
    with open(paths["cases"], "w", encoding="utf-8") as fc, \
            open(paths["outputs"], "w", encoding="utf-8") as fo:
        for q in range(n_cases):
            gold_docs = rng.sample(range(n_docs), rng.randint(1, 3))
            evidence = []
            for d in gold_docs:
                text = docs[f"d{d}"]
                s = rng.randrange(0, len(text) - 200)
                s = text.index(" ", s) + 1
                e = text.index(" ", s + 60)
                evidence.append({"doc_id": f"d{d}", "quote": text[s:e],
                                 "grade": rng.choice([1, 2])})
            cid = f"q{q:06d}"
            fc.write(json.dumps({
                "id": cid, "question": f"question {q} about {rng.choice(WORDS)}",
                "reference_answer": "an answer", "evidence": evidence,
                "nuggets": [{"text": "a fact", "vital": True}], "answerable": True,
                "tags": {"intent": f"i{rng.randrange(a)}", "source": f"s{rng.randrange(b)}",
                         "difficulty": f"d{rng.randrange(c)}"}}) + "\n")
            pool = gold_docs + rng.sample(range(n_docs), depth)
            cands = []
            for r in range(depth):
                d = f"d{rng.choice(pool)}"
                st = rng.randrange(0, 1500)
                cands.append({"doc_id": d, "text": docs[d][st:st + 400], "score": float(depth - r),
                              "start": st, "end": st + len(docs[d][st:st + 400])})
            fo.write(json.dumps({"case_id": cid, "candidates": cands, "context": cands[:5],
                                 "answer": "An answer.", "citations": [],
                                 "latency_ms": {"retrieve": 1.0}}) + "\n")
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--slices", type=int, default=50)
    a = ap.parse_args()
    print(make(a.out, a.cases, a.depth, a.slices))


if __name__ == "__main__":
    main()
