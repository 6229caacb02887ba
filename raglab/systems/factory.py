"""What the adapters of a framework's pipeline share (``system=langchain``,
``system=llamaindex``): the user's factory (``system.factory=MODULE:FUNCTION``, the module
found as ``system=python`` finds it), the plain dict of configuration sections it is called
with, an index built once per sweep (:func:`build_once`), hits made from a framework's
documents, and the clock of one answer (:class:`StageClock`: the retrieval and model calls
its callbacks saw, counted into the run's ``work``, timed per stage, their tokens).

The factory is called with ``{"chunker": {...}, "embedder": {...}, "reranker": {...},
"k": 5, "candidate_depth": 50, "context_token_budget": 1500, "prompt": {...},
"generator": {...}, "options": {...}}`` (``options``: ``+system.options.KEY=VALUE``).
"""

from __future__ import annotations

import contextvars
import json
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, field_validator

from raglab.components import NO_CONTEXT, BuildContext, System
from raglab.config import UNLISTED
from raglab.data.schema import Strict
from raglab.errors import ConfigError, install_line
from raglab.secrets import clip
from raglab.systems.outputs import MAX_BODY_BYTES


class FactoryCfg(Strict):
    """The settings every framework adapter has."""

    factory: str = Field(description=(
        "MODULE:FUNCTION, the function that builds your pipeline from the run's "
        "configuration sections (the module found in the working directory first)"))
    options: dict[str, Any] = Field(default_factory=dict, description=(
        "your own settings, passed to the factory as config['options'] (add one with "
        "+system.options.KEY=VALUE)"))
    doc_id_field: str = Field("doc_id", min_length=1, description=(
        "the metadata key holding a document's corpus id (then 'source' is tried)"))
    # the bound of one case's output, as the http and python systems' (+system.max_body_bytes=N)
    max_body_bytes: int = Field(MAX_BODY_BYTES, gt=0, le=2 ** 31, json_schema_extra=UNLISTED)

    @field_validator("factory")
    @classmethod
    def _module_colon_function(cls, v: str) -> str:
        module, sep, attr = v.partition(":")
        if not sep or not module or not attr.isidentifier():
            raise ValueError(f"factory {v!r} is not 'MODULE:FUNCTION' (for example "
                             "my_rag:build)")
        return v


def factory_config(run_cfg: Any) -> dict[str, Any]:
    """The plain dict the factory is called with (a fresh copy)."""
    sections = json.loads(json.dumps(run_cfg.system_sections(), default=str))
    sections["options"] = json.loads(json.dumps(run_cfg.system.options, default=str))
    return sections


def call_factory(what: str, target: str, config: dict[str, Any], work: Any = None) -> Any:
    """The user's pipeline: ``FUNCTION(config)`` of ``MODULE`` (one line when it cannot be
    imported or raises). Indexes built through :func:`build_once` count as ``index_builds``
    of ``work``."""
    from raglab.systems.python import import_user_module

    module_name, _, attr = target.partition(":")
    where = f"config {what}.factory"
    module = import_user_module(module_name, where)
    factory = getattr(module, attr, None)
    if factory is None or not callable(factory):
        raise ConfigError(f"{where}: {module_name!r} has no callable {attr!r}")
    token = _WORK.set(work)
    try:
        return factory(config)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's factory failed: one line
        raise ConfigError(f"{where}: {target}(config) raised {type(e).__name__}: "
                          f"{clip(' '.join(str(e).split()), 300)}") from None
    finally:
        _WORK.reset(token)


def factory_identity(target: str) -> dict[str, str]:
    """The factory and the SHA-256 of its module's source (nothing imported)."""
    import importlib.util

    from raglab.data.dataset import file_sha256
    from raglab.systems.python import on_path

    out = {"factory": target}
    try:
        on_path()
        spec = importlib.util.find_spec(target.partition(":")[0])
    except (ImportError, ValueError):
        return out
    if spec is not None and spec.origin and os.path.isfile(spec.origin):
        out["factory_source_sha256"] = file_sha256(Path(spec.origin))
    return out


def require(what: str, module: str, extra: str) -> None:
    """A ConfigError naming the extra when the framework is not installed."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"system={what} needs {module.split('.')[0]}: "
                          f"{install_line(extra)}")


# ---- an index built once for the jobs of a sweep that share what it depends on ----------
_WORK: contextvars.ContextVar[Any] = contextvars.ContextVar("raglab_factory_work",
                                                             default=None)
_BUILT: dict[str, Any] = {}
_BUILDING: dict[str, threading.Lock] = {}
_LOCK = threading.Lock()
#: the most indexes kept (the oldest is let go first)
MAX_KEPT = 8


def build_once(key: Any, build: Callable[[], Any]) -> Any:
    """``build()``, or what it returned before in this process for the same ``key`` (any
    JSON-able value: what the index depends on, such as ``config["chunker"]`` and
    ``config["embedder"]``). A factory calls it for its index, so the jobs of a sweep over
    ``k`` share one index and a sweep over ``chunker.size`` x ``k`` builds one per size. The
    jobs of a sweep run one after another in one process (Hydra's basic launcher); jobs
    in parallel processes build their own. Each build counts as one ``index_builds``."""
    text = json.dumps(key, sort_keys=True, default=str)
    with _LOCK:
        if text in _BUILT:
            return _BUILT[text]
        lock = _BUILDING.setdefault(text, threading.Lock())
    with lock:
        with _LOCK:
            if text in _BUILT:
                return _BUILT[text]
        value = build()
        work = _WORK.get()
        if work is not None:
            work.add("index_builds")
        with _LOCK:
            _BUILT[text] = value
            while len(_BUILT) > MAX_KEPT:
                del _BUILT[next(iter(_BUILT))]
            _BUILDING.pop(text, None)
        return value


# ---- hits from a framework's documents ---------------------------------------------------
def json_safe(value: Any) -> Any:
    """A metadata value as JSON can hold it (anything else as its text)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return str(value)


def make_hit(metadata: Mapping[str, Any], text: str, doc_id_field: str,
             fallback_id: str | None = None, start: Any = None, end: Any = None,
             score: Any = None) -> dict[str, Any]:
    """A hit: ``doc_id`` from ``metadata[doc_id_field]``, else ``metadata["source"]``, else
    ``fallback_id``; a document with none fails its case (ValueError naming the key)."""
    doc_id = metadata.get(doc_id_field)
    if not isinstance(doc_id, str) or not doc_id:
        doc_id = metadata.get("source")
    if not isinstance(doc_id, str) or not doc_id:
        doc_id = fallback_id
    if not isinstance(doc_id, str) or not doc_id:
        raise ValueError(f"a retrieved document has no corpus id: its metadata lacks "
                         f"{doc_id_field!r} (system.doc_id_field) and 'source'")
    hit: dict[str, Any] = {"doc_id": doc_id, "text": text}
    if isinstance(start, int) and not isinstance(start, bool) and start >= 0:
        hit["start"] = start
        hit["end"] = end if isinstance(end, int) and end >= start else start + len(text)
    if isinstance(score, (int, float)) and not isinstance(score, bool) and score == score:
        hit["score"] = float(score)
    rest = {k: json_safe(v) for k, v in metadata.items()
            if k not in (doc_id_field, "source", "start_index", "score")}
    if rest:
        hit["metadata"] = rest
    return hit


#: the work counter (``metrics.json`` ``work``) each timed stage's calls count as
STAGE_WORK = {"retrieve": "retrievals", "generate": "generations"}


class StageClock:
    """Per-stage latencies, call counts and token usage of one answer, from a framework's
    callbacks (start/end by run or span id). Several calls of one stage add up, also calls
    running side by side; a call made inside another of the same stage (a retriever that
    calls a retriever, a chat call made through a completion call) is part of it: pass
    ``nested=True`` (:meth:`within` tells, from the parents :meth:`link` recorded) and it is
    neither counted nor timed again."""

    def __init__(self) -> None:
        import time

        self._now = time.perf_counter
        self._lock = threading.Lock()  # a chain's parallel branches call back from threads
        self._open: dict[Any, tuple[str, float]] = {}
        self._parent: dict[Any, Any] = {}
        self.ms: dict[str, float] = {}
        self.calls: dict[str, int] = dict.fromkeys(STAGE_WORK, 0)
        self.usage: dict[str, float] = {}
        self.model: str | None = None

    def start(self, stage: str, run_id: Any, nested: bool = False) -> None:
        if nested:
            return
        with self._lock:
            self._open[run_id] = (stage, self._now())
            self.calls[stage] = self.calls.get(stage, 0) + 1

    def link(self, run_id: Any, parent: Any) -> None:
        """Records that ``run_id`` runs inside ``parent`` (None: at the top)."""
        with self._lock:
            self._parent[run_id] = parent

    def within(self, stage: str, run_id: Any) -> bool:
        """Whether ``run_id`` is, or runs inside (through the parents linked), a call of
        ``stage`` being timed: calls side by side are not inside each other."""
        with self._lock:
            seen: set[Any] = set()
            while run_id is not None and run_id not in seen:
                found = self._open.get(run_id)
                if found is not None and found[0] == stage:
                    return True
                seen.add(run_id)
                run_id = self._parent.get(run_id)
            return False

    def end(self, run_id: Any) -> bool:
        """Ends the call ``run_id``; False when it was not one being timed (nested)."""
        with self._lock:
            found = self._open.pop(run_id, None)
            if found is None:
                return False
            stage, t0 = found
            self.ms[stage] = round(self.ms.get(stage, 0.0) + (self._now() - t0) * 1000, 3)
            return True

    def add_usage(self, input_tokens: Any, output_tokens: Any) -> None:
        with self._lock:
            for name, n in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
                if isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 0:
                    self.usage[name] = self.usage.get(name, 0) + n

    def count(self, work: Any) -> None:
        """Adds the calls made to the run's work counters (``retrievals``,
        ``generations``); ``work`` None: nothing."""
        if work is None:
            return
        with self._lock:
            calls = dict(self.calls)
        for stage, n in calls.items():
            if n and stage in STAGE_WORK:
                work.add(STAGE_WORK[stage], n)


class SaidOnce:
    """A note printed once per run."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._said = False
        self._lock = threading.Lock()

    def __call__(self) -> None:
        import sys

        with self._lock:
            if self._said:
                return
            self._said = True
        print(f"raglab: note: {self.text}", file=sys.stderr, flush=True)


class FrameworkSystem(System):
    """What the adapters of a framework's pipeline share: the factory called once, its
    result checked to be a pipeline (or a retriever: retrieval metrics only, said once), and
    the output made from the answer's hits, its clock and the fields the contract does not
    name (kept, and warned about once)."""

    #: (the system's name, the framework's module, the extra that installs it)
    framework: ClassVar[tuple[str, str, str]]
    #: what the factory returns to score answers ("a retrieval chain")
    answering: ClassVar[str]
    cfg: FactoryCfg

    def __init__(self, cfg: FactoryCfg, ctx: BuildContext = NO_CONTEXT):
        require(*self.framework)
        _, retriever, described = self.accepted()
        self.cfg = cfg
        self.ctx = ctx
        built = call_factory("system", cfg.factory, factory_config(ctx.run), ctx.work)
        if not self.built_ok(built):
            raise ConfigError(f"config system.factory: {cfg.factory} returned a "
                              f"{type(built).__name__}, not {described}")
        self.pipeline: Any = built
        self.retriever_only = isinstance(built, retriever)
        self._retrieval_note = SaidOnce(
            "the factory returned a retriever: retrieval metrics only (the generation "
            f"metrics do not apply; return {self.answering} to score answers)")
        from raglab.systems.outputs import AddedFieldsWarning

        self._warn_added = AddedFieldsWarning()

    @classmethod
    def accepted(cls) -> tuple[tuple[type, ...], type, str]:
        """(the types a factory may return, the retriever type among them, their names)."""
        raise NotImplementedError

    @classmethod
    def built_ok(cls, built: Any) -> bool:
        """Whether the factory returned what this adapter reads."""
        return isinstance(built, cls.accepted()[0])

    @classmethod
    def preflight(cls, run_cfg: Any) -> None:
        require(*cls.framework)

    @classmethod
    def identity(cls, run_cfg: Any) -> dict[str, str]:
        return factory_identity(run_cfg.system.factory)

    def finish(self, out: dict[str, Any], clock: StageClock, case_id: str) -> Any:
        """The SystemOutput of ``out`` with the clock's latencies, usage and model."""
        from raglab.systems.outputs import OutputError, json_size_over, read_output

        if json_size_over(out, self.cfg.max_body_bytes):
            raise OutputError(f"answer larger than {self.cfg.max_body_bytes} bytes "
                              "(system.max_body_bytes)")
        out["latency_ms"] = dict(clock.ms)
        out["usage"] = dict(clock.usage)
        if clock.model:
            out["model"] = clock.model
        added: list[str] = []
        output = read_output(out, case_id, added=added)
        self._warn_added(added)
        return output
