"""Building one case's record and appending records safely (resumable after a kill)."""

from __future__ import annotations

import json
import operator
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from raglab.data.dataset import Dataset
from raglab.data.io import atomic_write_chunks
from raglab.data.record import CaseRecord, RecordLines, iter_records
from raglab.data.schema import Case, may_see
from raglab.errors import storage_error
from raglab.llm.client import add_usage, usage_between
from raglab.metrics.judging import GoldItem, judge_hits


def gold_summary(case: Case) -> dict[str, Any]:
    gold = {"answerable": case.answerable, "grades": [e.grade for e in case.evidence],
            "nuggets_vital": [n.vital for n in case.nuggets],
            "has_reference": bool(case.reference_answer),
            "must_not_contain": [m if isinstance(m, str) else m.model_dump(exclude_none=True)
                                 for m in case.must_not_contain]}
    if any(n.from_turn is not None for n in case.nuggets):
        gold["nuggets_from_turn"] = [n.from_turn for n in case.nuggets]
    return gold


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
        ids = set(map(_doc_id, hits))  # each document looked up once
        unknown |= ids.difference(corpus)  # (a lookup per id, in C)
        hidden = {d for d in ids & dataset.restricted if not may_see(corpus[d].acl, case.user)}
        if hidden:
            leaks += [{"severity": 1, "kind": "acl_leak", "stage": stage, "rank": rank + 1,
                       "doc_id": hit["doc_id"]}
                      for rank, hit in enumerate(hits) if hit["doc_id"] in hidden]
    judged["leaks"] = leaks
    judged["unknown_docs"] = sorted(unknown)
    return judged


_doc_id = operator.itemgetter("doc_id")

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

    def load(self, retry_errors: bool = True,
             keep: Callable[[CaseRecord], Any] | None = None,
             dropped: Callable[[Any], None] | None = None) -> dict[str, Any]:
        """The records to keep, by case id: each ``keep(record)`` (default: the record), so
        a resume holds what it needs of each case and never every whole record at once: the
        file is read one line at a time. With ``retry_errors`` the records of cases that
        failed (the system's or a grader's error) are dropped, so a resume runs those cases
        again. When lines are dropped (those, a case's older records, a torn last line) the
        file is rewritten without them, streamed to a temporary file renamed into place;
        ``dropped(model_usage)`` is called for each dropped record (what it spent is still
        spent)."""
        lines = RecordLines(self.path)
        kept: dict[str, Any] = {}
        winner: dict[str, int] = {}  # case id -> the line of its record that is kept
        spent: dict[str, Any] = {}  # case id -> the kept record's model_usage (when any)
        n = 0
        for lineno, rec in iter_records(self.path, lines):
            n += 1
            if retry_errors and rec.error:
                if dropped is not None:
                    dropped(rec.model_usage)
                continue
            # the last record of a case wins (a healed case may follow its old error)
            if rec.case_id in winner and dropped is not None:
                dropped(spent.pop(rec.case_id, None))
            winner[rec.case_id] = lineno
            if rec.model_usage is not None:
                spent[rec.case_id] = rec.model_usage
            kept[rec.case_id] = rec if keep is None else keep(rec)
        if self.path.exists() and (len(winner) != n or lines.torn):
            self._rewrite(set(winner.values()))
        return kept

    def _rewrite(self, wanted: set[int]) -> None:
        """The file with only the lines numbered ``wanted`` (in their order), each scrubbed
        of the secrets known now (as a record is when it is written)."""
        from raglab.secrets import SCRUBBER

        def chunks() -> Any:
            for lineno, raw, obj in RecordLines(self.path):
                if lineno not in wanted:
                    continue
                if not raw.endswith(b"\n"):
                    raw += b"\n"
                if SCRUBBER.found_in(raw):
                    raw = (json.dumps(SCRUBBER.scrub_obj(obj), ensure_ascii=False,
                                      allow_nan=False) + "\n").encode("utf-8")
                yield raw

        atomic_write_chunks(self.path, chunks())

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


class UsageLedger:
    """Model usage recorded with each case: every record written gets, as ``model_usage``,
    what the run's model client spent since the record before it (so calls shared by
    cases, and a generator's, are counted once), and the run's total is the sum over its
    records, whichever process wrote them, plus what this process spent after its last
    record. A resume adds what the records it drops (failed cases, run again) had spent
    to its first record. Only the calls of a process killed after its last record go
    uncounted (their answers are in the cache: a resume does not pay for them again)."""

    def __init__(self, llm: Any):
        self.llm = llm
        self.total: dict[str, Any] | None = None
        self.carried: dict[str, Any] | None = None
        self.mark = llm.counters() if llm is not None else None

    def loaded(self, usage: Any) -> None:
        """A kept record's usage (from an earlier process)."""
        self.total = add_usage(self.total, usage)

    def carry(self, usage: Any) -> None:
        """A dropped record's usage: added to the next record written."""
        if usage is not None:
            self.carried = add_usage(self.carried, usage)

    def _since(self) -> dict[str, Any]:
        now = self.llm.counters()
        spent = usage_between(now, self.mark)
        self.mark = now
        return spent

    def stamp(self, line: bytes) -> bytes:
        """``line`` (a record's, ending ``}\n``) with its ``model_usage`` added."""
        if self.llm is None:
            return line
        spent = self._since()
        if self.carried is not None:
            spent, self.carried = add_usage(self.carried, spent), None
        self.total = add_usage(self.total, spent)
        return line[:-2] + b',"model_usage":' + json.dumps(spent).encode() + b"}\n"

    def summary(self) -> dict[str, Any]:
        """The run's model_usage: every record's, and what was spent since the last."""
        total = add_usage(add_usage(self.total, self.carried), self._since())
        if total["cost_usd"] is not None:
            total["cost_usd"] = round(total["cost_usd"], 6)
        return total


def record_line(record: CaseRecord, finite: bool = False) -> bytes:
    """One record as its JSON line (UTF-8): :func:`public_line`'s line."""
    return public_line(record, finite)[1]


def public_line(record: CaseRecord, finite: bool = False) -> tuple[CaseRecord, bytes]:
    """The one scrubbed form of a record (DESIGN rule 15), as ``(record, line)``: the
    record every sink takes (the MLflow trace and its assessments; ``record`` itself when
    it holds no secret) and its JSON line (UTF-8), the same object as
    ``json.dumps(to_json())``, serialised by pydantic-core, with every known secret value
    scrubbed; a non-finite number is refused, as ``allow_nan=False`` (``finite``: the
    caller has checked there is none)."""
    from raglab.secrets import SCRUBBER

    line = record.__pydantic_serializer__.to_json(record, exclude_unset=True)
    # maybe a non-finite number: let json decide
    nonfinite = not finite and (b"NaN" in line or b"Infinity" in line)
    secret = SCRUBBER.found_in(line)
    if not (nonfinite or secret):
        return record, line + b"\n"
    # a secret in it: scrub string by string, never across JSON's syntax
    obj = SCRUBBER.scrub_obj(record.to_json()) if secret else record.to_json()
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n"
    return (record.scrubbed(obj) if secret else record), text.encode("utf-8")


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
