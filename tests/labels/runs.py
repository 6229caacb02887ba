"""A run directory written by hand (records and metrics only), for the label store's tests."""

from __future__ import annotations

import json
from pathlib import Path

VERSIONS = {"faithfulness": "f" * 12, "correctness": "c" * 12, "nuggets": "n" * 12}


def record(cid: str, answer: str | None, faith: float | None = 1.0, corr: float | None = 0.5,
           intent: str = "billing") -> dict:
    output = None if answer is None else {
        "case_id": cid, "answer": answer, "context": [{"doc_id": "d", "text": "a passage"}]}
    return {"case_id": cid, "tags": {"intent": intent}, "gold": {"answerable": True},
            "output": output, "verdicts": [],
            "metrics": {"faithfulness": faith, "correctness": corr,
                        "all_vital_present": 1.0}}


def make_run(path: Path, records: list[dict], versions: dict | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (path / "metrics.json").write_text(json.dumps({
        "overall": {}, "slices": {}, "metric_versions": versions or VERSIONS,
        "n_cases": len(records), "n_quarantined": 0, "errors": 0, "work": {}}))
    return path
