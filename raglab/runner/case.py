"""One case of a run: the system's answer and its checks, the judgments of its hits, its
grading, its metrics and diagnosis, as the record every sink takes and its line."""

from __future__ import annotations

import asyncio
import errno
import math
import operator
import threading
import time
from typing import Any

from pydantic_core import PydanticSerializationError

from raglab.config import RunCfg
from raglab.data.conversation import own_history, turn_id
from raglab.data.dataset import Dataset
from raglab.data.finite import check as check_finite
from raglab.data.finite import plain_finite
from raglab.data.record import CaseRecord
from raglab.data.schema import SystemOutput
from raglab.errors import StorageError
from raglab.llm.cost import metering
from raglab.metrics.case import case_metrics
from raglab.metrics.diagnosis import diagnose
from raglab.metrics.repeats import combine_repeats
from raglab.runner.records import gold_summary, judge_output, public_line
from raglab.secrets import clip
from raglab.systems.base import SystemRequest, ValidatedOutput

CASE_TIMEOUT_S = 600.0
#: errno values of an OSError that mean raglab's own storage failed, not the case
_STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO}
#: the fields of a record with a replayed output that hold only values already checked
#: (the case set's, the output's, the metrics', and judgments made of the output's ids)
_CHECKED = frozenset({"output", "metrics", "tags", "gold", "judgments", "severity_one"})


class CaseRunner:
    """Runs one case at a time for a run: ``slots`` bounds concurrent system calls only;
    grading concurrency is bounded by the grader's client (so a Message Batches job can
    gather every case)."""

    def __init__(self, cfg: RunCfg, ds: Dataset, system: Any, grading: Any,
                 weights: dict[str, float] | None, loop: asyncio.AbstractEventLoop,
                 pool: Any, slots: asyncio.Semaphore):
        self.cfg = cfg
        self.ds = ds
        self.system = system
        self.grading = grading
        self.weights = weights
        self.loop = loop
        self.pool = pool
        self.slots = slots
        self.sections = cfg.system_sections()
        # conversation.history=own: each turn's answer, for the turns after it (a resumed
        # run's recorded ones given at the start); a turn waits for the ones before it
        self.own = cfg.conversation.history == "own"
        self.answers: dict[str, str | None] = {}
        self._answered: dict[str, asyncio.Future] = {}
        self._run_ids = frozenset(c.id for c in ds.cases)

    def answered(self, case_id: str, answer: str | None) -> None:
        """A turn's answer is known (None: it failed): the turns after it may go on."""
        self.answers[case_id] = answer
        fut = self._answered.get(case_id)
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def _history(self, case: Any) -> list[dict[str, str]] | None:
        """The history of a turn under ``conversation.history=own`` (None: the frozen
        one), once every earlier turn of this run has answered."""
        conv = case.conversation
        if not self.own or conv is None or conv.turn == 1:
            return None
        for j in range(1, conv.turn):
            prior = turn_id(conv.id, j)
            if prior in self._run_ids and prior not in self.answers:
                fut = self._answered.setdefault(prior, self.loop.create_future())
                await fut
        return own_history(case, self.answers)

    async def run(self, case: Any) -> tuple[CaseRecord, CaseRecord, bytes]:
        """``(record, public record, line)``: the case's record as kept in memory, the
        same with every known secret scrubbed (what the tracker's traces and assessments
        are written from, the record itself when it holds none) and its records.jsonl
        line, made from that one scrubbed form."""
        cfg, ds, system, grading = self.cfg, self.ds, self.system, self.grading
        record: dict[str, Any] = {"case_id": case.id, "tags": dict(case.tags),
                                  "gold": gold_summary(case), "output": None,
                                  "judgments": None, "verdicts": [], "graded": False,
                                  "metrics": {}, "error": None}
        if self.weights is not None:
            record["weight"] = self.weights[case.id]
        conv = case.conversation
        history = await self._history(case)
        if conv is not None:
            record["conversation"] = {"id": conv.id, "turn": conv.turn,
                                      "n_turns": conv.n_turns,
                                      "history": "own" if self.own else "reference"}
            if history is not None:  # what this system was given (its own answers)
                record["conversation"]["messages"] = history
        req = SystemRequest.from_case(case, self.sections, history)

        def timed():  # measured in the worker: queueing for a slot is not the system's latency
            t0 = time.perf_counter()
            try:
                out = system.answer(req)
            except Exception:
                raise
            except BaseException as e:  # SystemExit(3) in the system's code: its case's error
                if isinstance(e, KeyboardInterrupt) and \
                        threading.current_thread() is threading.main_thread():
                    raise  # maybe Ctrl-C or SIGTERM (a signal lands in the main thread only)
                raise Raised(e) from None
            return out, (time.perf_counter() - t0) * 1000

        raw = None
        try:
            # (asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a cancel, Ctrl-C,
            # that lands as the call ends, and the run would go on)
            if getattr(system, "blocking", True):
                async with self.slots, asyncio.timeout(CASE_TIMEOUT_S):
                    raw, total_ms = await self.loop.run_in_executor(self.pool, timed)
            else:  # answered on this loop, at once: no slot to wait for, no await to time
                raw, total_ms = timed()
            output = output_dict(raw)
            if output["case_id"] != case.id:
                raise ValueError(f"output is for case {output['case_id']!r}")
            if not isinstance(raw, ValidatedOutput):  # a replayed line was checked as read
                check_finite(output)  # NaN/Infinity or a lone surrogate: this case fails
            check_spans(output, ds)
        except TimeoutError:
            record["error"] = f"system: timed out after {CASE_TIMEOUT_S:g} s"
        except StorageError:
            raise  # raglab's own storage failed: stop the run, not this case
        except OSError as e:
            if e.errno in _STORAGE_ERRNOS:
                from raglab.errors import storage_error

                raise storage_error(e, "a file of the system under test") from None
            record["error"] = f"system: {type(e).__name__}: {one_line(e)}"
        except Exception as e:  # the system's failure is this case's error; the run goes on
            record["error"] = f"system: {e.name if isinstance(e, Raised) else type(e).__name__}" \
                f": {one_line(e)}"
        else:
            lat = output["latency_ms"]
            if "total" not in lat:  # never less than the stages it reports (a replayed
                # output's stages were measured when it first ran)
                lat["total"] = round(max(total_ms, sum(lat.values())), 3)
            record["output"] = output
            record["judgments"] = judge_output(case, output, ds, cfg.metrics.straddle_min_fraction,
                                               cfg.metrics.fuzzy_threshold)
            if record["judgments"]["leaks"]:
                record["severity_one"] = record["judgments"]["leaks"]
            if self.own and conv is not None:
                self.answered(case.id, output.get("answer"))
            if grading is not None and output.get("answer") is not None:
                await self._grade(case, output, record)
        if self.own and conv is not None and case.id not in self.answers:
            self.answered(case.id, None)  # it failed: the next turn gets an empty answer
        record["metrics"] = case_metrics(record, cfg.metrics.cutoffs, cfg.k, cfg.candidate_depth)
        if grading is not None and grading.requested_repeats > 1 and record["graded"]:
            per = [record["metrics"]] + [
                case_metrics({**record, "verdicts": vs}, cfg.metrics.cutoffs, cfg.k,
                             cfg.candidate_depth) for vs in record.get("repeat_verdicts", [])]
            record["metrics"], record["repeat_variance"] = combine_repeats(per)
            record["repeats"] = grading.requested_repeats
        record["diagnosis"] = diagnose(record, cfg.diagnosis)
        rec = CaseRecord.model_validate(record)
        try:  # serialised here, once: a value JSON cannot hold fails this case, not the run
            # a replayed output holds JSON values only, checked as they were read, and so
            # do the judgments (ranks and its document ids); then the rest of the record,
            # checked here, decides whether the line needs a scan
            # (an ungraded record without error holds nothing else from outside raglab)
            plain = isinstance(raw, ValidatedOutput) and finite_metrics(record["metrics"]) \
                and ((not record["graded"] and record["error"] is None)
                     or plain_finite({k: v for k, v in record.items() if k not in _CHECKED}))
            return (rec, *public_line(rec, finite=plain))
        except (ValueError, PydanticSerializationError):
            try:
                check_finite(record)  # names the field
                why = "a value that cannot be written as JSON"
            except ValueError as e:
                why = str(e)
        # the failed case keeps what came from the case set, nothing derived from the output
        failed: dict[str, Any] = {k: record[k] for k in ("case_id", "tags", "gold", "weight")
                                  if k in record}
        failed.update(output=None, judgments=None, verdicts=[], graded=False,
                      error=clip(f"record: {why}", 1000))
        failed["metrics"] = case_metrics(failed, cfg.metrics.cutoffs, cfg.k, cfg.candidate_depth)
        failed["diagnosis"] = diagnose(failed, cfg.diagnosis)
        rec = CaseRecord.model_validate(failed)
        return (rec, *public_line(rec))

    async def _grade(self, case: Any, output: dict[str, Any], record: dict[str, Any]) -> None:
        """The grader's verdicts of the case (every repeat), its cost and its errors."""
        grading = self.grading
        with metering() as meter:  # the grader's cost, apart from the system's
            graded = await asyncio.gather(*(grading.grade(case, output, r)
                                            for r in range(grading.repeats)))
        record["grading_cost_usd"] = meter.total()
        if meter.calls:  # the model calls that served its grading (raglab.llm.cost), in
            # a fixed order (judgments run side by side finish in any order), so a resumed
            # or repeated run writes the same record
            record["grading_calls"] = sorted(meter.calls, key=_call_order)
        verdicts, factual = graded[0]
        if grading.repeats > 1:
            record["repeat_verdicts"] = [v for v, _ in graded[1:]]
            verdicts_all = [v for vs, _ in graded for v in vs]
        else:
            verdicts_all = verdicts
        record["verdicts"] = verdicts
        record["n_factual_sentences"] = factual
        record["graded"] = True
        errs = [v for v in verdicts_all if v.get("error")]
        if errs:
            record["error"] = clip("grader: " + "; ".join(
                f"{v['family']}: {v['error']}" for v in errs), 1000)
        bad = [v["item"] for v in verdicts
               if v["family"] == "faithfulness" and v.get("label") == "CONTRADICTED"]
        if bad:
            record["contradicted_claims"] = bad


def _call_order(call: dict[str, Any]) -> tuple:
    """What a call did, not what it cost or whether a cache answered it (which differ
    between a run and its resume)."""
    return (call.get("repeat", 0), str(call.get("family")), str(call.get("purpose")),
            str(call.get("model")), str(call.get("backend")))


class Raised(Exception):
    """A BaseException that is not Exception raised by a system's code (``SystemExit(3)``,
    a ``KeyboardInterrupt`` raised in a worker thread, where no signal lands): an error of
    its case like any other, never the end of the run. ``name`` is its type's name; its
    text is the original's."""

    def __init__(self, e: BaseException):
        super().__init__(str(e))
        self.name = type(e).__name__


def output_dict(raw: Any) -> dict[str, Any]:
    """A system's answer as the SystemOutput JSON object (validated unless already so)."""
    if isinstance(raw, ValidatedOutput):
        return dict(raw)
    out = raw if isinstance(raw, SystemOutput) else SystemOutput.model_validate(raw)
    return out.model_dump()


def finite_metrics(metrics: dict[str, Any]) -> bool:
    """Whether every metric value is a finite number, None or another falsy value (no
    value JSON cannot hold; False: let the line's scan decide, and name the value)."""
    try:  # (None and 0 are falsy: filter leaves them out, finite either way)
        return all(map(math.isfinite, filter(None, metrics.values())))
    except TypeError:
        return False


def check_spans(output: dict[str, Any], ds: Dataset) -> None:
    """A hit's span must have both ends or neither, and lie inside its document (when the
    corpus has it). Its order (a forward range) is the output schema's check, done once
    (raglab.data.schema.forward_spans): ``output`` is a SystemOutput's dump."""
    lengths = ds.doc_lengths
    for stage in ("candidates", "context"):
        hits = output.get(stage) or ()
        if not hits:
            continue
        ends = list(map(_end, hits))
        if None not in ends and None not in map(_start, hits):  # every hit has its span
            limits: Any = map(lengths.get, map(_doc_id, hits), ends)  # (a length, or end)
            if not all(map(operator.le, ends, limits)):  # in bulk
                _span_error(output, ds, stage)
            continue
        for h in hits:  # (one plain loop: twice as fast as min over maps)
            start, end = h["start"], h["end"]
            if start is None or end is None:
                if start is not end:  # half a span
                    _span_error(output, ds, stage)
            elif end > lengths.get(h["doc_id"], end):
                _span_error(output, ds, stage)


_doc_id, _start, _end = (operator.itemgetter(k) for k in ("doc_id", "start", "end"))


def _span_error(output: dict[str, Any], ds: Dataset, stage: str) -> None:
    """Raise the ValueError that names the first bad span of ``stage``."""
    for rank, hit in enumerate(output.get(stage) or [], start=1):
        start, end = hit.get("start"), hit.get("end")
        if start is None and end is None:
            continue
        if start is None or end is None or end < start:
            raise ValueError(f"{stage} hit {rank} ({hit['doc_id']}): span {start}-{end} "
                             "is not a forward range")
        doc = ds.corpus.get(hit["doc_id"])
        if doc is not None and end > len(doc.text):
            raise ValueError(f"{stage} hit {rank} ({hit['doc_id']}): span {start}-{end} "
                             f"is outside the document ({len(doc.text)} characters)")


def one_line(e: BaseException) -> str:
    """An exception's text on one line, scrubbed, then cut."""
    return clip(" ".join(str(e).split()), 500)
