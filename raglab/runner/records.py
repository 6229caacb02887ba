"""Building one case's record and appending records safely (resumable after a kill)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, BinaryIO

from raglab.data.dataset import Dataset
from raglab.data.io import write_jsonl
from raglab.data.record import CaseRecord, read_records
from raglab.data.schema import Case, may_see
from raglab.errors import storage_error
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
        hidden = {d for d in ids & dataset.restricted if not may_see(corpus[d].acl, case.user)}
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
    on close: only a power cut or an operating-system crash can lose the last second.

    Every line is scrubbed of known secret values (a system's error page may echo its
    request headers). A write that fails (disk full, I/O error) raises StorageError: the
    lines before it stay as they were."""

    def __init__(self, path: Path, fsync_interval_s: float | None = None):
        self.path = path
        self.fsync_interval_s = FSYNC_INTERVAL_S if fsync_interval_s is None \
            else fsync_interval_s
        self._fh: BinaryIO | None = None
        self._synced = 0.0
        self._syncing: Any = None  # a background fsync (close(background=True))
        self._end = 0  # the size of the file once this writer's lines are written
        self._sync_error: OSError | None = None

    def load(self, retry_errors: bool = True) -> list[CaseRecord]:
        """The records to keep. With ``retry_errors`` the records of cases that failed (the
        system's or a grader's error) are dropped, so a resume runs those cases again."""
        rows = read_records(self.path)
        kept = [r for r in rows if not (retry_errors and r.error)]
        # the last record of a case wins (a healed case may follow its old error)
        by_id = {r.case_id: r for r in kept}
        kept = [r for r in kept if by_id[r.case_id] is r]
        if self.path.exists() and (len(kept) != len(rows) or _torn(self.path)):
            write_jsonl(self.path, [r.to_json() for r in kept])
        return kept

    def append(self, record: CaseRecord | None, line: bytes | None = None) -> None:
        """Append ``record`` (``line``: its ``record_line``, when already serialised; the
        record is then not needed)."""
        if line is None:
            assert record is not None, "append needs a record or its line"
            line = record_line(record)
        start = None
        try:
            fh = self._fh
            if fh is None:
                fh = self._fh = open(self.path, "ab")
                self._synced = time.monotonic()
                self._end = fh.tell()  # then counted: no seek per line
            start = self._end
            fh.write(line)
            fh.flush()
            self._end = start + len(line)
            now = time.monotonic()
            if now - self._synced >= self.fsync_interval_s:
                os.fsync(fh.fileno())
                self._synced = now
        except OSError as e:
            self._drop_partial(start)
            raise storage_error(e, "records.jsonl", self.path) from None

    def _drop_partial(self, start: int | None) -> None:
        """After a failed append, cut the file back to where that line began."""
        try:
            if self._fh is not None:
                self._fh.close()
        except OSError:
            pass
        self._fh = None
        if start is None:
            return
        try:
            with open(self.path, "r+b") as fh:
                fh.truncate(start)
        except OSError:
            pass  # a torn last line is dropped by the next load anyway

    def close(self, background: bool = False) -> None:
        """Flush, fsync and close. ``background``: the fsync runs in a thread (it waits for
        the disk, not the interpreter), so the caller can go on; :meth:`wait` then waits
        for it, and raises StorageError if it failed."""
        if self._fh is None:
            return
        fh, self._fh = self._fh, None
        try:
            fh.flush()
        except OSError as e:
            fh.close()
            raise storage_error(e, "records.jsonl", self.path) from None
        if not background:
            self._sync_and_close(fh)
            self.wait()
            return
        import threading

        self._syncing = threading.Thread(target=self._sync_and_close, args=(fh,),
                                         name="raglab-fsync", daemon=True)
        self._syncing.start()

    def _sync_and_close(self, fh: Any) -> None:
        try:
            os.fsync(fh.fileno())
        except OSError as e:
            self._sync_error = e
        finally:
            try:
                fh.close()
            except OSError:
                pass

    def wait(self) -> None:
        """Wait for a background fsync (see :meth:`close`)."""
        syncing, self._syncing = self._syncing, None
        if syncing is not None:
            syncing.join()
        error, self._sync_error = self._sync_error, None
        if error is not None:
            raise storage_error(error, "records.jsonl", self.path) from None


def record_line(record: CaseRecord, finite: bool = False) -> bytes:
    """One record as its JSON line (UTF-8), the same object as ``json.dumps(to_json())``,
    serialised by pydantic-core, with every known secret value scrubbed; a non-finite number
    is refused, as ``allow_nan=False`` (``finite``: the caller has checked there is none)."""
    from raglab.secrets import SCRUBBER

    line = record.__pydantic_serializer__.to_json(record, exclude_unset=True)
    # maybe a non-finite number: let json decide
    slow = not finite and (b"NaN" in line or b"Infinity" in line)
    if not slow and SCRUBBER.found_in(line):
        slow = True  # a secret in it: scrub string by string, never across JSON's syntax
    if slow:
        return (json.dumps(SCRUBBER.scrub_obj(record.to_json()), ensure_ascii=False,
                           allow_nan=False) + "\n").encode("utf-8")
    return line + b"\n"


def _torn(path: Path) -> bool:
    """Whether the file does not end with a complete line."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() == 0:
                return False
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) != b"\n"
    except OSError:
        return False
