"""Synthetic production traffic for the monitor tests (seeded, two days)."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

FACTS = [
    ("How long do refunds take?",
     "Refunds are paid back to the original card within {n} business days."),
    ("When do exports run?", "Exports run nightly at {n}:00 UTC from the Reports page."),
    ("How many seats does the Team plan include?",
     "The Team plan includes {n} seats and shared folders."),
    ("How long are invoices kept?", "Invoices are kept for {n} years in the billing archive."),
]


def traffic_lines(n: int, seed: int, shift: float = 0.0, contradict: float = 0.0,
                  start: str = "2026-11-02T00:00:00+00:00") -> list[dict]:
    rnd = random.Random(seed)
    t0 = datetime.fromisoformat(start)
    out = []
    for i in range(n):
        q, fact = FACTS[i % len(FACTS)]
        n_true = 3 + i % 5
        passage = fact.format(n=n_true)
        said = fact.format(n=n_true + 4) if rnd.random() < contradict else passage
        top = rnd.gauss(10.0 + shift, 1.5)
        out.append({
            "id": f"req-{seed}-{i}", "question": q,
            "timestamp": (t0 + timedelta(minutes=2880 * i / n)).isoformat(),
            "candidates": [{"doc_id": f"kb/{i % 4}", "text": passage, "score": top},
                           {"doc_id": "kb/x", "text": "Unrelated text.", "score": top - 2}],
            "context": [{"doc_id": f"kb/{i % 4}", "text": passage, "score": top},
                        {"doc_id": "kb/x", "text": "Our office dog is called Biscuit.",
                         "score": top - 2}],
            "answer": said, "feedback": "down" if i % 10 == 0 else "up",
            "user": {"id": f"u{i % 7}", "groups": ["customer"]},
            "filters": {"region": "EU"}})
    return out


def write_traffic(path: Path, rows: list[dict], bad: bool = True) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if bad:  # one malformed line, one without an answer: counted, not fatal
        text += '{"question": "cut off", "timest\n'
        text += json.dumps({"question": "no answer", "timestamp": "2026-11-02T10:00:00Z"}) + "\n"
    path.write_text(text)
    return path
