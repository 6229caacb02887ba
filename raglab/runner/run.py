"""One run: dataset -> system -> judgments -> grading -> records -> metrics -> tracking."""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from raglab.cache import StageCache, content_key
from raglab.config import RunCfg
from raglab.data.dataset import Dataset, dataset_identity, load_dataset
from raglab.data.io import (
    atomic_write_json,
    atomic_write_text,
    remove_stale_temporaries,
    write_jsonl,
)
from raglab.data.record import CaseRecord
from raglab.errors import NegativeOutcome, UserError
from raglab.graders.orchestrate import Grading
from raglab.graders.spec import diagnosis_version, family_versions
from raglab.metrics.aggregate import aggregate, diagnosis_counts, weight_summary
from raglab.metrics.case import metric_names
from raglab.metrics.conversation import conversation_summary, flat_metrics, nugget_presence
from raglab.metrics.versions import conversation_version
from raglab.runner.case import CaseRunner
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
from raglab.runner.failures import error_summary
from raglab.runner.identity import check_dataset, check_resume, check_system, write_identity
from raglab.runner.lock import RunDirLock
from raglab.runner.progress import Progress
from raglab.runner.records import RecordWriter, UsageLedger
from raglab.systems.base import WorkCounter

#: runs with more cases than this, not tracked, draw their report's plots on demand
PLOT_MAX_CASES = 1000
#: cases started ahead of the one being written (at least 4 x concurrency)
CASES_IN_FLIGHT = 256


class Run:
    def __init__(self, cfg: RunCfg, run_dir: Path, resolved_yaml: str, name: str | None = None,
                 diffs: list | None = None, config: dict | None = None,
                 sequential: Any = None):
        """``resolved_yaml``: the text of config.yaml; ``config``: the same configuration as
        a dict, when the caller has it (the report then does not read the file back);
        ``sequential``: a raglab.sequential.run.Sequential when the run stops once its
        checks are settled (its cases in a seeded order, in batches)."""
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
        self.sequential = sequential

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
        if self.sequential is not None:  # before any work: graded as its baseline was
            self.sequential.check_versions(self.versions)
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

        self.weights = effective_weights(ds.cases, cfg.dataset.weights, str(ds.cases_path))
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
        if self.sequential is not None:
            self.warnings += self.sequential.data_warnings(hashes)
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

        own = cfg.conversation.history == "own"
        resumed: dict[str, str | None] = {}  # (own history) the recorded turns' answers

        def keep(rec: CaseRecord) -> dict[str, Any]:
            usage.loaded(rec.model_usage)
            if own and getattr(rec, "conversation", None):
                resumed[rec.case_id] = (rec.output or {}).get("answer")
            row = slim_record(rec)
            # one copy of each metric name for all the rows (as a run's own rows share them)
            row["metrics"] = {sys.intern(k): v for k, v in rec.metrics.items()}
            return row

        # what aggregation reads, streamed
        kept = writer.load(keep=keep, dropped=usage.carry)
        todo = [c for c in ds.cases if c.id not in kept]
        seq = self.sequential
        if seq is not None:  # the seeded order, a batch at a time (docs/sequential.md)
            rank = {cid: i for i, cid in enumerate(seq.arrange([c.id for c in ds.cases]))}
            todo.sort(key=lambda c: rank[c.id])
        size = max(len(todo), 1) if seq is None else seq.cfg.batch
        batches = iter([todo[i:i + size] for i in range(0, len(todo), size)])
        batch = [] if seq is not None and kept and seq.settled(kept) else next(batches, [])
        system = build_system(cfg, ds, self.cache, self.work, self.llm)
        for w in getattr(system, "warnings", None) or []:  # e.g. replayed ids not in the set
            print(f"raglab: warning: {w}", file=sys.stderr, flush=True)
            self.warnings.append(w)
        pool = ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix="raglab-sut")
        runner = CaseRunner(cfg, ds, system, grading, self.weights, asyncio.get_running_loop(),
                            pool, asyncio.Semaphore(cfg.concurrency))
        runner.answers.update(resumed)
        progress = Progress(len(ds.cases), len(kept), cfg.progress)

        def start(case) -> asyncio.Task:
            return asyncio.create_task(runner.run(case))

        def recorded(rec: CaseRecord, public: CaseRecord, line: bytes) -> None:
            writer.append(None, usage.stamp(line))
            kept[rec.case_id] = slim_record(rec)
            if self.tracker is not None:  # e.g. its MLflow trace, written off this loop
                self.tracker.case_recorded(public)  # from the scrubbed form, as the line
            progress.add(1, rec.error is not None)

        tasks: deque[asyncio.Task] = deque()
        completed = False  # every case recorded: the last fsync may run in the background
        shared = None  # work shared by the cases (grouped calls): started, not waited for
        try:
            inline = grading is None and not getattr(system, "blocking", True)
            while batch:  # every case at once, or (sequential) a batch at a time
                if grading is not None:
                    shared = grading.start(batch)
                if inline:
                    # each case is done when it starts (answered on this loop, no grading):
                    # one at a time, no task (cases ahead would only hold finished records)
                    for i, c in enumerate(batch, start=1):
                        recorded(*await runner.run(c))
                        if not i % 64:  # (a case awaits nothing: the loop gets its turn
                            await asyncio.sleep(0)  # here, so a Ctrl-C lands at once)
                else:
                    # a bounded window of cases in flight keeps memory flat whatever the
                    # set's size (every case at once in batch mode, so one Message Batches
                    # job gathers them all)
                    window = len(batch) if getattr(cfg.grader, "mode", "online") == "batch" \
                        else max(CASES_IN_FLIGHT, 4 * cfg.concurrency)
                    queued = iter(batch)
                    tasks = deque(start(c) for c in itertools.islice(queued, window))
                    while tasks:  # records are written in case order, each when it is ready
                        nxt = next(queued, None)
                        if nxt is not None:
                            tasks.append(start(nxt))
                        rec, public, line = await tasks[0]
                        tasks.popleft()  # a finished task holds its record: let it go
                        recorded(rec, public, line)
                if seq is None:
                    break
                if shared is not None:  # a batch is done: settled, or the next one
                    await shared
                    shared = None
                batch = [] if seq.settled(kept) else next(batches, [])
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
        convs = conversation_summary(records)
        if convs is not None:  # a run without conversations: metrics.json as before
            metrics["conversations"] = {**convs, "version": conversation_version(versions)}
            metrics["overall"].update(flat_metrics(convs))
        if self.sequential is not None:
            metrics["sequential"] = self.sequential.summary(kept)
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
    conv = (rec.model_extra or {}).get("conversation")  # (no attribute miss: an exception)
    if conv:  # a conversation's turn: what the conversation metrics read
        out["conversation"] = {k: conv.get(k) for k in ("id", "turn", "n_turns", "history")}
        if rec.gold.nuggets_from_turn is not None:
            out["nugget_presence"] = nugget_presence(rec.to_json())
    return out


def _self_graded_warning(model: str | None, why: str) -> str:
    return (f"self-graded: the grader's model ({model}) {why}: a judge grading its own "
            "outputs tends to favour them (self-preference bias); grade with another model "
            "for a fair comparison")
