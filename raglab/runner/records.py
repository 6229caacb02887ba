"""Building one case's record and appending records safely (resumable after a kill)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from raglab.data.dataset import Dataset
from raglab.data.io import write_jsonl
from raglab.data.record import CaseRecord, read_records
from raglab.data.schema import Case, may_see
from raglab.metrics.judging import GoldItem, judge_hits


def gold_summary(case: Case) -> dict[str, Any]:
    return {"answerable": case.answerable, "grades": [e.grade for e in case.evidence],
            "nuggets_vital": [n.vital for n in case.nuggets],
            "has_reference": bool(case.reference_answer),
            "must_not_contain": [m if isinstance(m, str) else m.model_dump(exclude_none=True)
                                 for m in case.must_not_contain]}


def gold_items(case: Case, dataset: Dataset) -> list[GoldItem]:
    items = []
    for ev, loc in zip(case.evidence, dataset.locations[case.id]):
        text = ev.quote or dataset.corpus[ev.doc_id].text[loc.start:loc.end]
        items.append(GoldItem(ev.doc_id, loc.start, loc.end, ev.grade, ev.quote is None, text))
    return items


def judge_output(case: Case, output: dict[str, Any], dataset: Dataset,
                 straddle_min_fraction: float, fuzzy_threshold: float) -> dict[str, Any]:
    """Which hits hold which evidence, and which hits leak documents the user may not see."""
    gold = gold_items(case, dataset)
    texts = {g.doc_id: dataset.corpus[g.doc_id].text for g in gold}
    judged: dict[str, Any] = {}
    for stage in ("candidates", "context"):
        judged[stage] = judge_hits(output.get(stage, []), gold, texts, straddle_min_fraction,
                                   fuzzy_threshold)
    leaks: list[dict[str, Any]] = []
    unknown: set[str] = set()
    corpus = dataset.corpus
    for stage in ("candidates", "context"):
        hits = output.get(stage, [])
        ids = {hit["doc_id"] for hit in hits}  # each document looked up once
        unknown.update(d for d in ids if d not in corpus)
        hidden = {d for d in ids - unknown if not may_see(corpus[d].acl, case.user)}
        if hidden:
            leaks += [{"severity": 1, "kind": "acl_leak", "stage": stage, "rank": rank + 1,
                       "doc_id": hit["doc_id"]}
                      for rank, hit in enumerate(hits) if hit["doc_id"] in hidden]
    judged["leaks"] = leaks
    judged["unknown_docs"] = sorted(set(unknown))
    return judged


#: a record writer fsyncs at most this often (and when it closes)
FSYNC_INTERVAL_S = 1.0


class RecordWriter:
    """Appends one JSON line per case, flushed to the operating system at once, so a killed
    process (SIGKILL included) loses at most the line being written; ``load`` drops such a
    torn last line and rewrites the file clean. The file is fsynced at most once a second and
    on close: only a power cut or an operating-system crash can lose the last second."""

    def __init__(self, path: Path, fsync_interval_s: float = FSYNC_INTERVAL_S):
        self.path = path
        self.fsync_interval_s = fsync_interval_s
        self._fh = None
        self._synced = 0.0

    def load(self) -> list[CaseRecord]:
        rows = read_records(self.path)
        if self.path.exists():
            write_jsonl(self.path, [r.to_json() for r in rows])  # drop a torn last line
        return rows

    def append(self, record: CaseRecord) -> None:
        if self._fh is None:
            self._fh = open(self.path, "ab")
            self._synced = time.monotonic()
        self._fh.write(record_line(record))
        self._fh.flush()
        now = time.monotonic()
        if now - self._synced >= self.fsync_interval_s:
            os.fsync(self._fh.fileno())
            self._synced = now

    def close(self) -> None:
        if self._fh is not None:
            try:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            finally:
                self._fh.close()
                self._fh = None


def record_line(record: CaseRecord) -> bytes:
    """One record as its JSON line (UTF-8), the same object as ``json.dumps(to_json())``,
    serialised by pydantic-core; a non-finite number is refused, as ``allow_nan=False``."""
    line = record.__pydantic_serializer__.to_json(record, exclude_unset=True)
    if b"NaN" in line or b"Infinity" in line:  # maybe a non-finite number: let json decide
        return (json.dumps(record.to_json(), ensure_ascii=False, allow_nan=False)
                + "\n").encode("utf-8")
    return line + b"\n"
