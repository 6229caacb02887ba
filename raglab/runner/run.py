"""One run: dataset -> system -> judgments -> grading -> records -> metrics -> tracking."""

from __future__ import annotations

import asyncio
import errno
import itertools
import json
import math
import sys
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic_core import PydanticSerializationError

from raglab.cache import StageCache, content_key
from raglab.config import RunCfg
from raglab.data.dataset import Dataset, dataset_identity, load_dataset
from raglab.data.finite import check as check_finite
from raglab.data.finite import plain_finite
from raglab.data.io import (
    atomic_write_json,
    atomic_write_text,
    remove_stale_temporaries,
    write_jsonl,
)
from raglab.data.record import CaseRecord
from raglab.data.schema import SystemOutput
from raglab.errors import NegativeOutcome, StorageError, UserError
from raglab.graders.orchestrate import Grading
from raglab.graders.spec import diagnosis_version, family_versions
from raglab.llm.cost import metering
from raglab.metrics.aggregate import aggregate, diagnosis_counts, weight_summary
from raglab.metrics.case import case_metrics, metric_names
from raglab.metrics.catalog import HEADLINE
from raglab.metrics.diagnosis import diagnose
from raglab.metrics.repeats import combine_repeats
from raglab.report.format import fmt
from raglab.runner.components import (
    build_grader,
    build_system,
    grader_model,
    llm_client,
    model_prices,
    preflight,
    system_identity_of,
    system_model,
    tracks,
)
from raglab.runner.failures import error_summary, summary_lines
from raglab.runner.identity import check_dataset, check_resume, check_system, write_identity
from raglab.runner.lock import RunDirLock
from raglab.runner.progress import Progress
from raglab.runner.records import (
    RecordWriter,
    UsageLedger,
    gold_summary,
    judge_output,
    record_line,
)
from raglab.secrets import clip
from raglab.systems.base import SystemRequest, ValidatedOutput, WorkCounter

CASE_TIMEOUT_S = 600.0
#: runs with more cases than this, not tracked, draw their report's plots on demand
PLOT_MAX_CASES = 1000
#: cases started ahead of the one being written (at least 4 x concurrency)
CASES_IN_FLIGHT = 256
#: errno values of an OSError that mean raglab's own storage failed, not the case
_STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO}
#: the fields of a record with a replayed output that hold only values already checked
#: (the case set's, the output's, the metrics', and judgments made of the output's ids)
_CHECKED = frozenset({"output", "metrics", "tags", "gold", "judgments", "severity_one"})


class Run:
    def __init__(self, cfg: RunCfg, run_dir: Path, resolved_yaml: str, name: str | None = None,
                 diffs: list | None = None, config: dict | None = None):
        """``resolved_yaml``: the text of config.yaml; ``config``: the same configuration as
        a dict, when the caller has it (the report then does not read the file back)."""
        self.cfg = cfg
        self.config = config
        self.weights: dict[str, float] | None = None   # case id -> weight (None: unweighted)
        self.name = name
        self.diffs = diffs
        self.run_dir = run_dir
        self.resolved_yaml = resolved_yaml
        self.work = WorkCounter()
        self.cache = StageCache(cfg.cache_dir)
        self.llm: Any = None
        self.versions: dict[str, str] = {}
        self.warnings: list[str] = []
        self.lock = RunDirLock(run_dir)
        self.tracker: Any = None

    # -- before any work ------------------------------------------------------------------
    def preflight(self) -> dict[str, str]:
        cfg = self.cfg
        prompts = preflight(cfg)
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            from raglab.errors import storage_error

            raise storage_error(e, "the run directory", self.run_dir) from None
        self.lock.acquire()  # released when the process ends (or by close())
        remove_stale_temporaries(self.run_dir)  # a killed run's half-written files
        cfg_file = self.run_dir / "config.yaml"
        if cfg_file.exists() and cfg_file.read_text(encoding="utf-8") != self.resolved_yaml:
            raise UserError("the run directory holds a run of a different configuration; "
                            "choose another hydra.run.dir", file=str(cfg_file))
        model_prices(cfg)  # one price per model, before any work
        self.versions = family_versions(cfg.grader, prompts, cfg.metrics)
        self.versions["diagnosis"] = diagnosis_version(cfg.diagnosis)
        check_resume(self.run_dir, self.versions)
        return prompts

    def run_warnings(self) -> list[str]:
        """Warnings about the run's design, printed and recorded in ``metrics.json``."""
        cfg, out = self.cfg, []
        if self.self_graded():
            out.append(_self_graded_warning(grader_model(cfg), "is the generator's model"))
        return out

    def self_graded(self, reported: set[str] | frozenset[str] = frozenset()) -> bool:
        """Whether the grader calls the very model the system under test generates with
        (its configured model, or one its outputs report in ``model``). A grader that calls
        no model (heuristic, none) never is."""
        judge = grader_model(self.cfg)
        return judge is not None and (judge == system_model(self.cfg) or judge in reported)

    # -- the run --------------------------------------------------------------------------
    def execute(self, tracker: Any = None) -> dict[str, Any]:
        try:
            return self._execute(tracker)
        finally:
            self.lock.release()

    def _execute(self, tracker: Any = None) -> dict[str, Any]:
        cfg = self.cfg
        prompts = self.preflight()
        ds = load_dataset(cfg.dataset.corpus, cfg.dataset.cases, None,
                          cfg.dataset.fuzzy_threshold)
        if cfg.fail_on_quarantine and ds.quarantined:
            write_jsonl(self.run_dir / "quarantine.jsonl", [q.as_dict() for q in ds.quarantined])
            for q in ds.quarantined:
                print(q.render(), file=sys.stderr)
            raise NegativeOutcome(f"fail_on_quarantine=true: {len(ds.quarantined)} quarantined "
                            f"case(s), listed above and in {self.run_dir / 'quarantine.jsonl'}",
                            file=str(ds.cases_path))
        if not ds.cases:
            raise UserError("no usable case: every case is quarantined "
                            f"(see {self.run_dir / 'quarantine.jsonl'})", file=str(ds.cases_path))
        from raglab.data.weights import effective_weights

        self.weights = effective_weights(ds.cases, cfg.dataset.weights)
        hashes = {"corpus_sha256": ds.corpus_hash, "cases_sha256": ds.cases_hash}
        check_dataset(self.run_dir, hashes)
        system_identity = system_identity_of(cfg)
        check_system(self.run_dir, system_identity)
        write_jsonl(self.run_dir / "quarantine.jsonl", [q.as_dict() for q in ds.quarantined])
        # built from the configuration scrubbed value by value (a key is never changed)
        atomic_write_text(self.run_dir / "config.yaml", self.resolved_yaml, scrubbed=True)
        versions = self.versions
        write_identity(self.run_dir, versions, content_key(self.resolved_yaml, length=16),
                       hashes, {"system": system_identity} if system_identity else None)
        self.warnings = self.run_warnings()
        for w in self.warnings:
            print(f"raglab: warning: {w}", file=sys.stderr, flush=True)
        self.tracker = tracker
        if tracker is not None:
            tracker.run_dir = self.run_dir  # where the tracker keeps its run's id (resume)
            tracker.started(ds, versions, self_graded=self.self_graded())
        return asyncio.run(self._execute_async(ds, prompts, versions))

    async def _execute_async(self, ds: Dataset, prompts: dict[str, str],
                             versions: dict[str, str]) -> dict[str, Any]:
        cfg = self.cfg
        self.llm = llm_client(cfg, self.cache)
        grader = build_grader(cfg, prompts, self.llm)
        grading = Grading(grader, cfg.grader.name, versions, self.cache, self.work,
                          getattr(cfg.grader, "repeats", 1)) if grader is not None else None
        writer = RecordWriter(self.run_dir / "records.jsonl")
        self.usage = usage = UsageLedger(self.llm)

        def keep(rec: CaseRecord) -> dict[str, Any]:
            usage.loaded(rec.model_usage)
            row = slim_record(rec)
            # one copy of each metric name for all the rows (as a run's own rows share them)
            row["metrics"] = {sys.intern(k): v for k, v in rec.metrics.items()}
            return row

        # what aggregation reads, streamed
        kept = writer.load(keep=keep, dropped=usage.carry)
        todo = [c for c in ds.cases if c.id not in kept]
        sections = cfg.system_sections()
        system = build_system(cfg, ds, self.cache, self.work, self.llm)
        for w in getattr(system, "warnings", None) or []:  # e.g. replayed ids not in the set
            print(f"raglab: warning: {w}", file=sys.stderr, flush=True)
            self.warnings.append(w)
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix="raglab-sut")
        slots = asyncio.Semaphore(cfg.concurrency)
        progress = Progress(len(ds.cases), len(kept), cfg.progress)

        def start(case) -> asyncio.Task:
            return asyncio.create_task(
                self._case(case, sections, system, grading, ds, loop, pool, slots))

        tasks: deque[asyncio.Task] = deque()
        completed = False  # every case recorded: the last fsync may run in the background
        shared = None  # work shared by the cases (grouped calls): started, not waited for
        try:
            if grading is not None:
                shared = grading.start(todo)
            # a bounded window of cases in flight keeps memory flat whatever the set's size
            # (every case at once in batch mode, so one Message Batches job gathers them all)
            window = len(todo) if getattr(cfg.grader, "mode", "online") == "batch" \
                else max(CASES_IN_FLIGHT, 4 * cfg.concurrency)
            queued = iter(todo)
            tasks = deque(start(c) for c in itertools.islice(queued, window))
            while tasks:  # records are written in case order, each as soon as it is ready
                nxt = next(queued, None)
                if nxt is not None:
                    tasks.append(start(nxt))
                rec, line = await tasks[0]
                tasks.popleft()  # a finished task holds its record: let it go
                writer.append(None, usage.stamp(line))
                kept[rec.case_id] = slim_record(rec)
                if self.tracker is not None:  # e.g. its MLflow trace, written off this loop
                    self.tracker.case_recorded(rec)
                progress.add(1, rec.error is not None)
            if shared is not None:
                await shared  # what no case waited for (its cases had no answer) is cached too
            completed = True
        except BaseException:
            # an aborted run (a storage error, Ctrl-C): grader coroutines of cancelled cases
            # that never started are dropped, which is expected, not worth a warning each
            import warnings

            warnings.filterwarnings("ignore", message="coroutine .* was never awaited",
                                    category=RuntimeWarning)
            raise
        finally:
            for t in tasks:
                t.cancel()
            if shared is not None:
                shared.cancel()
            # a finished run's last fsync goes on while its metrics are aggregated
            writer.close(background=completed)
            progress.close()
            pool.shutdown(wait=False, cancel_futures=True)
            if self.llm is not None:
                await self.llm.aclose()
            if grader is not None:
                await grader.aclose()
        return self._finish(ds, versions, kept, writer)

    async def _case(self, case, sections, system, grading, ds, loop, pool,
                    slots) -> tuple[CaseRecord, bytes]:
        """One case. ``slots`` bounds concurrent system calls only; grading concurrency is
        bounded by the grader's client (so a Message Batches job can gather every case)."""
        cfg = self.cfg
        record: dict[str, Any] = {"case_id": case.id, "tags": dict(case.tags),
                                  "gold": gold_summary(case), "output": None,
                                  "judgments": None, "verdicts": [], "graded": False,
                                  "metrics": {}, "error": None}
        if self.weights is not None:
            record["weight"] = self.weights[case.id]
        req = SystemRequest.from_case(case, sections)

        def timed():  # measured in the worker: queueing for a slot is not the system's latency
            t0 = time.perf_counter()
            return system.answer(req), (time.perf_counter() - t0) * 1000

        raw = None
        try:
            # (asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a cancel, Ctrl-C,
            # that lands as the call ends, and the run would go on)
            async with slots, asyncio.timeout(CASE_TIMEOUT_S):
                raw, total_ms = (await loop.run_in_executor(pool, timed)
                                 if getattr(system, "blocking", True) else timed())
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
            record["error"] = f"system: {type(e).__name__}: {_one_line(e)}"
        except Exception as e:  # the system's failure is this case's error; the run goes on
            record["error"] = f"system: {type(e).__name__}: {_one_line(e)}"
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
            if grading is not None and output.get("answer") is not None:
                with metering() as meter:  # the grader's cost, apart from the system's
                    graded = await asyncio.gather(*(grading.grade(case, output, r)
                                                    for r in range(grading.repeats)))
                record["grading_cost_usd"] = meter.total()
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
            return rec, record_line(rec, finite=plain)
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
        return rec, record_line(rec)

    def metric_names(self) -> list[str]:
        cfg = self.cfg
        return metric_names(cfg.metrics.cutoffs, cfg.k, cfg.candidate_depth)

    def _finish(self, ds: Dataset, versions: dict[str, str],
                kept: dict[str, dict[str, Any]], writer: RecordWriter) -> dict[str, Any]:
        """Aggregate, then (once the records are durable) write ``metrics.json`` and the
        report."""
        cfg = self.cfg
        records = [kept[c.id] for c in ds.cases if c.id in kept]
        reported = {r["model"] for r in records if r.get("model")}
        self_graded = self.self_graded(reported)
        if self_graded and not self.self_graded():  # the outputs say so: one line, now
            w = _self_graded_warning(grader_model(cfg), "is the model the system reports")
            print(f"raglab: warning: {w}", file=sys.stderr, flush=True)
            self.warnings.append(w)
        agg = aggregate(records, self.metric_names())
        metrics = {
            "overall": agg["overall"], "slices": agg["slices"], "metric_versions": versions,
            "n_cases": len(records), "n_quarantined": len(ds.quarantined),
            "errors": sum(1 for r in records if r.get("error")),
            "error_summary": error_summary(records),
            "diagnoses": diagnosis_counts(records),
            "work": self.work.as_dict(),
            **weight_summary(records),
            "dataset": {**dataset_identity(cfg.dataset.name, cfg.dataset.corpus,
                                           cfg.dataset.cases),
                        "corpus_sha256": ds.corpus_hash, "cases_sha256": ds.cases_hash},
            "config_hash": content_key(self.resolved_yaml, length=16),
            "warnings": list(self.warnings),
            "self_graded": self_graded,
        }
        if self.llm is not None:
            # summed over the records of every process that ran this directory
            metrics["model_usage"] = self.usage.summary()
        writer.wait()  # the records are on disk before the run says it finished
        atomic_write_json(self.run_dir / "metrics.json", metrics)
        from raglab.report.run_report import write_run_report

        # plots of a large untracked run are drawn on demand (tracking draws its own)
        write_run_report(self.run_dir, name=self.name, diffs=self.diffs,
                         plots=len(records) <= PLOT_MAX_CASES or tracks(cfg),
                         config=self.config)
        return metrics


def slim_record(rec: CaseRecord) -> dict[str, Any]:
    """The part of a record that aggregation and the diagnosis counts read (kept in
    memory for ``metrics.json``; outputs are not)."""
    out = {"case_id": rec.case_id, "tags": rec.tags,
           "gold": {"answerable": rec.gold.answerable},
           "metrics": rec.metrics, "error": rec.error,
           "diagnosis": rec.diagnosis, "model": (rec.output or {}).get("model")}
    if rec.weight is not None:
        out["weight"] = rec.weight
    return out


def _self_graded_warning(model: str | None, why: str) -> str:
    return (f"self-graded: the grader's model ({model}) {why}: a judge grading its own "
            "outputs tends to favour them (self-preference bias); grade with another model "
            "for a fair comparison")


def output_dict(raw: Any) -> dict[str, Any]:
    """A system's answer as the SystemOutput JSON object (validated unless already so)."""
    if isinstance(raw, ValidatedOutput):
        return dict(raw)
    out = raw if isinstance(raw, SystemOutput) else SystemOutput.model_validate(raw)
    return out.model_dump()


def finite_metrics(metrics: dict[str, Any]) -> bool:
    """Whether every metric value is a finite number or None (False: let the line's scan
    decide, and name the value)."""
    try:
        return all(map(math.isfinite, [v for v in metrics.values() if v is not None]))
    except TypeError:
        return False


def check_spans(output: dict[str, Any], ds: Dataset) -> None:
    """A hit's span must be a forward range inside its document (when the corpus has it)."""
    lengths = ds.doc_lengths
    for stage in ("candidates", "context"):
        for h in output.get(stage) or ():  # (one plain loop: twice as fast as min over maps)
            start, end = h["start"], h["end"]
            if start is None or end is None:
                if start is not end:  # half a span
                    _span_error(output, ds, stage)
            elif end < start or end > lengths.get(h["doc_id"], end):
                _span_error(output, ds, stage)


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


def error_rate_exceeded(metrics: dict[str, Any], max_error_rate: float) -> str | None:
    """The one line to fail a run with when its error rate is above ``max_error_rate`` (a
    run in which every case failed always fails), else None."""
    n, errors = metrics.get("n_cases") or 0, metrics.get("errors") or 0
    if n == 0 or errors == 0:
        return None
    rate = errors / n
    if rate > max_error_rate or errors == n:
        top = summary_lines(metrics.get("error_summary") or [], width=200)[:1]
        return (f"{errors} of {n} cases failed (error rate {rate:.0%} > max_error_rate "
                f"{max_error_rate:g}): the metrics do not measure the system"
                + (f"; most frequent: {top[0]}" if top else "")
                + "; run the same command again in the same run directory to retry the "
                "failed cases")
    return None


def _one_line(e: BaseException) -> str:
    return clip(" ".join(str(e).split()), 500)


def summary_text(metrics: dict[str, Any], run_dir: Path,
                 calibration: dict[str, str] | None = None) -> str:
    o = metrics["overall"]
    rows = [
        ("cases", metrics["n_cases"]), ("quarantined", metrics["n_quarantined"]),
        ("errors", metrics["errors"]),
    ]
    for k in (*HEADLINE, "latency_ms.total"):
        if k in o:
            rows.append((k, fmt(o[k])))
    w = max(len(str(r[0])) for r in rows)
    lines = [f"raglab run: {run_dir}"] + [f"  {str(k).ljust(w)}  {v}" for k, v in rows]
    if metrics.get("error_summary"):  # why cases failed, most frequent first
        lines.append("  most frequent errors (all in records.jsonl):")
        lines += [f"    {x}" for x in summary_lines(metrics["error_summary"])]
    diag = metrics.get("diagnoses") or {}
    causes = {c: n for c, n in (diag.get("overall") or {}).items() if n}
    if diag:
        lines.append(f"  failed cases: {diag.get('failed', 0)}" + (
            " (" + ", ".join(f"{c} {n}" for c, n in causes.items()) + ")" if causes else ""))
    lines.append("  work: " + json.dumps(metrics["work"]))
    if "model_usage" in metrics:
        lines.append("  model usage: " + json.dumps(metrics["model_usage"]))
    if calibration is not None:  # each family's version and its kappa (raglab calibrate)
        versions = metrics.get("metric_versions") or {}
        fw = max((len(f) for f in versions), default=0)
        lines.append("  metric versions (calibration):")
        lines += [f"    {fam.ljust(fw)}  {ver}  {calibration.get(fam, 'uncalibrated')}"
                  for fam, ver in versions.items()]
    return "\n".join(lines)


def print_summary(metrics: dict[str, Any], run_dir: Path,
                  calibration: dict[str, str] | None = None) -> None:
    print(summary_text(metrics, run_dir, calibration), file=sys.stdout, flush=True)
