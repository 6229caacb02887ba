"""The contract of every component group, and the one build context every factory gets.

A choice of a config group (``conf/GROUP/NAME.yaml``) is a class registered with
:func:`raglab.registry.register` that subclasses its group's protocol below, and is made
with ``cls(section_cfg, ctx)``: its own config section and the :class:`BuildContext` of
the run. The protocols give every optional behaviour a typed default (a class attribute
or a classmethod), so code outside a component asks it by attribute, never by its name::

    @register("reranker", "mine", config=MineCfg)
    class Mine(Reranker):
        def rerank(self, question, cands): ...

Optional behaviour, on every group: ``uses_llm`` (the component calls a model through the
run's one LLM client), ``preflight(run_cfg)`` (checks before any work: keys, extras,
files), ``llm_settings(cfg, run_cfg)`` (the client's settings when this component owns
the client) and ``model_id(cfg)`` (the model it calls: by default its config's ``model``
when it uses an LLM, else None; the judge-is-the-generator check compares these).
Group-specific ones are documented with each protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

#: the config groups that map to code (one registered class per choice)
GROUPS = ("system", "chunker", "embedder", "reranker", "generator", "grader", "tracking")


@dataclass(frozen=True)
class BuildContext:
    """What a factory may need besides its own config section (the same for every group;
    a field a caller has no value for stays None or empty)."""

    run: Any = None  #: the whole run configuration (raglab.config.RunCfg)
    dataset: Any = None  #: the loaded dataset (raglab.data.dataset.Dataset)
    cache: Any = None  #: the stage cache (raglab.cache.StageCache)
    work: Any = None  #: the run's work counters (raglab.systems.base.WorkCounter)
    llm: Any = None  #: the run's one LLM client (raglab.llm.client.LLMClient), or None
    prompts: Mapping[str, str] = field(default_factory=dict)  #: the grader's prompt texts
    resolved: Mapping[str, Any] = field(default_factory=dict)  #: the public resolved config
    run_name: str = ""  #: the run's name
    sweep_dir: str | None = None  #: the sweep's directory (one job of a sweep), or None
    sweep_name: str = ""  #: the sweep's own name (its parent run's), when it has one
    #: what a tracker reads from and hands to the rest of raglab (run.json, the report),
    #: so tracking imports neither: see :class:`RunFiles`
    run_files: Any = None


#: the context of a component made outside a run (a test, a tool): every field empty
NO_CONTEXT = BuildContext()


class RunFiles(Protocol):
    """The run directory's files a tracker needs, handed in by the runner."""

    def tracked_identity(self, run_dir: Any) -> dict[str, Any] | None:
        """The tracked run a previous attempt of this run started, if any (run.json)."""
        ...

    def remember_identity(self, run_dir: Any, identity: dict[str, Any]) -> None:
        """Keep the tracked run's identity in run.json (a resumed run continues it)."""
        ...

    def report_files(self, run_dir: Any) -> list[Any]:
        """The report files of a finished run, to log with it."""
        ...

    def description(self, run_name: str, metrics: dict[str, Any], resolved: Any,
                    diffs: list, link: Any) -> str:
        """The tracked run's description."""
        ...


class Component(Protocol):
    """What every registered component class has (defaults for the optional parts)."""

    #: calls a model through the run's one LLM client
    uses_llm: ClassVar[bool] = False
    cfg: Any  #: the component's own config section
    ctx: BuildContext

    def __init__(self, cfg: Any, ctx: BuildContext = NO_CONTEXT) -> None:
        self.cfg = cfg
        self.ctx = ctx

    @classmethod
    def preflight(cls, run_cfg: Any) -> None:
        """Checks before any work (keys, optional extras, files): raise a ConfigError."""

    @classmethod
    def llm_settings(cls, cfg: Any, run_cfg: Any) -> dict[str, Any]:
        """The LLM client's settings when this component owns the run's client."""
        raise NotImplementedError(f"{cls.__name__} calls no model")

    @classmethod
    def model_id(cls, cfg: Any) -> str | None:
        """The model this component calls, as its config names it (any backend: the same
        string is the same model), or None when it calls none."""
        model = getattr(cfg, "model", None) if cls.uses_llm else None
        return model if isinstance(model, str) and model else None


@runtime_checkable
class System(Component, Protocol):
    """A system under test (``system`` group): ``answer(request) -> SystemOutput`` (a dict
    of that shape is accepted)."""

    def answer(self, request: Any) -> Any: ...

    #: whether ``answer`` may block (a network call, a model, a search): the runner then
    #: calls it in a worker thread. A system that only looks its answer up (replay) says
    #: False and is called on the event loop, without a thread hop per case.
    blocking: bool = True

    @classmethod
    def llm_owner(cls, run_cfg: Any) -> tuple[str, Any] | None:
        """The system's component that calls a model, if any: ``(group, its config)``."""
        return None

    @classmethod
    def identity(cls, run_cfg: Any) -> dict[str, str]:
        """What identifies the system under test beyond its config (a replayed file's
        SHA-256, a python target's source file's): a resume of a run whose system changed
        under the same config is refused (``run.json`` ``system``)."""
        return {}


@runtime_checkable
class Chunker(Component, Protocol):
    """``chunk(doc_id, text)``: chunks with character offsets into the document."""

    def chunk(self, doc_id: str, text: str) -> list[Any]: ...


class Ranker(Protocol):
    """A loaded index: one score per chunk and which of the allowed chunks it returns."""

    def rank(self, query: str, mask: Any) -> tuple[Any, Any]: ...


@runtime_checkable
class Embedder(Component, Protocol):
    """An index kind (``embedder`` group): writes its artifacts, reads them back."""

    def build(self, path: Any, texts: list[str]) -> None: ...

    def load(self, path: Any) -> Ranker: ...


@runtime_checkable
class Reranker(Component, Protocol):
    """``rerank(question, candidates)`` over ``(position, score, text)`` triples."""

    def rerank(self, question: str, cands: list[tuple[int, float, str]]
               ) -> list[tuple[int, float, str]]: ...


@runtime_checkable
class Generator(Component, Protocol):
    """``generate(question, context_texts) -> dict`` with ``answer``, ``citations``,
    ``usage`` (and optionally ``latency_ms``, ``cached``)."""

    def generate(self, question: str, context_texts: list[str]) -> dict[str, Any]: ...


@runtime_checkable
class Grader(Component, Protocol):
    """A grader backend (``grader`` group). Each judgment is asked separately, so the
    orchestrator can cache it by family version and inputs; labels come from the sets of
    :mod:`raglab.data.verdicts`. A call that fails after retries raises
    :class:`raglab.llm.client.LLMCallError`.

    Optional: ``grades = False`` (``grader=none``: the run grades nothing, no grader is
    made), ``load_prompts(cfg)`` (the prompt texts its metric versions depend on),
    ``deterministic = True`` (the same inputs always get the same judgment: repeats are
    not asked) or ``for_repeat(r)``, the same grader asking as independent repeat ``r``
    (so its own response cache keys differ by repeat)."""

    #: makes judgments (False: the run scores retrieval, context and abstention only)
    grades: ClassVar[bool] = True
    #: the same inputs always get the same judgment: repeats are never asked
    deterministic: ClassVar[bool] = False
    #: the version of the grader's own rules, by family (a rule-based grader bumps a
    #: family's number when its rules change that family's verdicts; a family absent here
    #: keeps the version it had, so other graders' versions never move with it)
    rules_versions: ClassVar[dict[str, int]] = {}

    @classmethod
    def load_prompts(cls, cfg: Any) -> dict[str, str]:
        """The prompt texts this grader's metric versions depend on."""
        return {}

    def prompt_texts(self) -> dict[str, str]:
        """The prompt templates by name (their texts are part of the metric versions)."""
        return {}

    def for_repeat(self, repeat: int) -> Grader:
        """The same grader asking as independent repeat ``repeat`` (grader.repeats)."""
        return self

    async def decompose(self, question: str, answer: str) -> list[str]:
        """The answer's atomic claims (none: an abstention)."""
        ...

    async def verify(self, claims: list[str], passages: list[str],
                     family: str) -> Sequence[Sequence[Any]]:
        """``[label, evidence or None, passage index or None]`` per claim, a ClaimLabel
        against the passages."""
        ...

    async def nuggets(self, question: str, answer: str,
                      nuggets: list[str]) -> Sequence[Sequence[str | None]]:
        """``[label, evidence or None]`` per nugget, a NuggetLabel."""
        ...

    async def relevance(self, question: str, answer: str) -> Sequence[str]:
        """``[label, reason]``, a RelevanceLabel."""
        ...

    async def aclose(self) -> None:
        return None


class Tracker(Component, Protocol):
    """Where a run is tracked (``tracking`` group). Every method defaults to doing nothing
    (``tracking=none``: the run directory is the only record)."""

    #: logs runs to a tracking store (False: the run directory is the only record)
    tracks: ClassVar[bool] = False
    diffs: list  #: config differences from the shipped defaults (the command's)
    run_dir: Any  #: set by the run: where the tracked run's id is kept

    def __init__(self, cfg: Any, ctx: BuildContext = NO_CONTEXT) -> None:
        self.cfg = cfg
        self.ctx = ctx
        self.diffs = []
        self.run_dir = None

    def check(self) -> None:
        """Fail before any work when the tracking backend is unusable."""

    def started(self, dataset: Any, versions: dict[str, str], self_graded: bool = False
                ) -> None:
        """The run started (its dataset is loaded and its metric versions known)."""

    def case_recorded(self, record: Any) -> None:
        """A case's record was written (called from the case loop: must not block).
        ``record`` is its one scrubbed form, the one its records.jsonl line was made from:
        whatever a tracker writes of it holds no known secret."""

    def finished(self, run_dir: Any) -> None:
        """The run finished and wrote ``run_dir``."""

    def killed(self) -> None:
        """The run was interrupted."""

    def failed(self, message: str) -> None:
        """The run failed with ``message``."""

    def where(self) -> str | None:
        """Where to look at the tracked run, for the summary (None: nowhere)."""
        return None


#: group -> the protocol its registered classes subclass
CONTRACTS: dict[str, type] = {"system": System, "chunker": Chunker, "embedder": Embedder,
                              "reranker": Reranker, "generator": Generator,
                              "grader": Grader, "tracking": Tracker}
