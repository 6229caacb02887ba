"""Two runs written by hand with human labels stored beside them, for the tests of the
prediction-powered rows of ``compare`` and of ``estimator: ppi`` gates.

``N`` cases; faithfulness (a [0, 1] share) as people score it drops by about 0.05 from the
baseline to the candidate, while the judge scores the candidate 0.15 too high (a judge that
prefers the candidate's style): the judge's difference is about +0.10. ``n`` cases are
sampled (the same ones in both runs, as ``raglab label`` draws them) and labelled.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from raglab.labels.store import (
    SampleDesign,
    StoredLabel,
    answer_sha256,
    case_set_sha256,
    store_labels,
    write_sample,
)

VERSIONS = {"faithfulness": "f" * 12, "correctness": "c" * 12, "nuggets": "n" * 12,
            "retrieval": "r" * 12, "citations": "t" * 12, "relevance": "v" * 12,
            "abstention": "a" * 12}


def _record(cid: str, answer: str, faith: float, intent: str) -> dict:
    output = {"case_id": cid, "answer": answer,
              "context": [{"doc_id": "d", "text": f"passage of {cid}"}]}
    return {"case_id": cid, "tags": {"intent": intent}, "gold": {"answerable": True},
            "output": output, "verdicts": [], "error": None,
            "metrics": {"faithfulness": float(faith), "all_vital_present": 1.0}}


def make_run(path: Path, records: list[dict], versions: dict | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    vals = [r["metrics"]["faithfulness"] for r in records]
    (path / "metrics.json").write_text(json.dumps({
        "overall": {"faithfulness": float(np.mean(vals)), "all_vital_present": 1.0},
        "slices": {}, "metric_versions": versions or VERSIONS,
        "n_cases": len(records), "n_quarantined": 0, "errors": 0, "work": {}}))
    (path / "config.yaml").write_text("k: 5\n")
    return path


def labelled_pair(root: Path, N: int = 120, n: int = 40, seed: int = 0,
                  label_candidate: bool = True, by: str | None = None
                  ) -> tuple[Path, Path, dict]:
    """``(baseline dir, candidate dir, truth)``; truth holds the human and judge means.
    ``by="intent"``: a stratified sample, ``n`` cases of each intent."""
    rng = np.random.default_rng(seed)
    ids = [f"c{i:03d}" for i in range(N)]
    intents = ["billing" if i % 2 else "hr" for i in range(N)]
    yb = rng.beta(3, 2, N)
    yc = np.clip(yb - 0.05 + rng.normal(0, 0.05, N), 0, 1)
    fb = np.clip(yb + rng.normal(0, 0.05, N), 0, 1)
    s = rng.uniform(0, 0.667, N)
    fc = (1 - s) * yc + s
    base = make_run(root / "base", [_record(c, f"answer b {c}", f, t)
                                    for c, f, t in zip(ids, fb, intents)])
    cand = make_run(root / "cand", [_record(c, f"answer c {c}", f, t)
                                    for c, f, t in zip(ids, fc, intents)])
    if by is None:
        strata = {"all": ids}
    else:
        strata = {v: [c for c, t in zip(ids, intents) if t == v] for v in ("billing", "hr")}
    drawn = {h: sorted(rng.choice(members, min(n, len(members)), replace=False).tolist())
             for h, members in strata.items()}
    sampled = sorted(c for cs in drawn.values() for c in cs)
    design = SampleDesign(seed=seed, by=by, population={h: len(m) for h, m in strata.items()},
                          sampled=drawn, case_set_sha256=case_set_sha256(ids))
    human = {"base": dict(zip(ids, yb)), "cand": dict(zip(ids, yc))}
    runs = [(base, "base")] + ([(cand, "cand")] if label_candidate else [])
    for run, key in runs:
        write_sample(run, design, {"n": n, "metrics": ["faithfulness"]})
        recs = {json.loads(x)["case_id"]: json.loads(x)
                for x in (run / "records.jsonl").read_text().splitlines()}
        store_labels(run, [StoredLabel(cid, "faithfulness", round(float(human[key][cid]), 6),
                                       answer_sha256(recs[cid]["output"]) or "",
                                       VERSIONS["faithfulness"], "", "test")
                           for cid in sampled])
    truth = {"human_delta": float(np.mean(yc - yb)), "judge_delta": float(np.mean(fc - fb)),
             "sampled": sampled}
    return base, cand, truth
