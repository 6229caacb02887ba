"""Typed schemas of the run configuration (nouns only).

The sections every run has (dataset, prompt, metrics, the top-level keys) are declared
here. The component groups (system, chunker, embedder, reranker, generator, grader,
tracking) are declared by the code that implements each choice, registered in
:mod:`raglab.registry`; :func:`run_model` assembles them into one model whose group fields
are discriminated unions on ``name``, so a typo fails with the valid choices.
"""

from __future__ import annotations

import functools
import operator
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    StrictInt,
    ValidationError,
    create_model,
    model_validator,
)
from pydantic.config import JsonDict

from raglab import registry
from raglab.components import GROUPS
from raglab.data.io import first_problem
from raglab.data.schema import MAX_WEIGHT, Strict
from raglab.errors import ConfigError
from raglab.metrics.diagnosis import DiagnosisCfg

#: the config groups that map to code (one registered class per choice)
COMPONENT_GROUPS = GROUPS


# ---- dataset -----------------------------------------------------------------------------
Share = Annotated[float, Field(ge=0, le=MAX_WEIGHT, allow_inf_nan=False)]


class DatasetCfg(Strict):
    name: str = Field("custom", description=(
        "the dataset's name in MLflow, reports and records (a shipped set's name with other "
        "files becomes the cases file's base name)"))
    corpus: str
    cases: str
    labels: str | None = None
    fuzzy_threshold: float = Field(90, ge=0, le=100, description=(
        "rapidfuzz alignment score (0-100) accepted when a gold quote is not found exactly"))
    weights: dict[str, dict[str, Share]] = Field(default_factory=dict, description=(
        "shares of traffic by tag value, e.g. {intent: {billing: 0.4, api: 0.6}}: every mean "
        "and paired statistic is weighted to match them (with each case's own weight)"))
    #: the name was the cases file's, not the config's (the run says so once)
    _named_after_cases: bool = PrivateAttr(False)

    @model_validator(mode="after")
    def _not_the_demo(self):
        from raglab.data.dataset import data_name

        self.name, self._named_after_cases = data_name(self.name, self.corpus, self.cases)
        return self


# ---- the models every component calls ------------------------------------------------------
class LLMCfg(Strict):
    base_url: str | None = Field(None, description=(
        "an OpenAI-compatible server for the grader, generator and drafter that do not set "
        "their own base_url (null: OPENAI_BASE_URL, else OpenAI's API)"))
    prices: dict[str, dict[str, float]] = Field(default_factory=dict, description=(
        "USD per million tokens by model name ({MODEL: {input, output, cache_write, "
        "cache_read}}), over the shipped table (raglab/llm/prices.yaml); a model priced "
        "nowhere has an unknown cost (n/a)"))

    @model_validator(mode="after")
    def _prices(self):
        from raglab.llm.prices import PRICE_KEYS

        for model, p in self.prices.items():
            bad = sorted(set(p) - set(PRICE_KEYS))
            if bad or any(v < 0 for v in p.values()):
                raise ValueError(f"prices of {model!r}: keys are {', '.join(PRICE_KEYS)} "
                                 "(USD per million tokens, at least 0)")
        return self


# ---- prompt ------------------------------------------------------------------------------
class PromptCfg(Strict):
    name: str
    system: str = ""
    template: str

    @model_validator(mode="after")
    def _placeholders(self):
        for ph in ("{question}", "{context}"):
            if ph not in self.template:
                raise ValueError(f"prompt template lacks the placeholder {ph}")
        return self


# ---- shared by the graders (heuristic, claude) -------------------------------------------
class DecompositionCfg(Strict):
    max_claims: int = Field(12, gt=0, le=1000)
    drop_hedges: bool = True


# ---- sequential decisions ----------------------------------------------------------------
class SequentialCfg(Strict):
    """``sequential``: off unless ``against`` names a baseline run (docs/sequential.md)."""

    against: str | None = Field(None, min_length=1, description=(
        "a baseline run (directory or MLflow run id) graded on the same cases: the run takes "
        "its cases in a seeded order, in batches, and stops once every check of `gates` is "
        "settled on a confidence sequence (null: off, every case is run)"))
    gates: str = Field("default", min_length=1, description=(
        "the gate set whose checks settle the run (comparisons of metrics in [0, 1]; "
        "budgets such as latency and cost are read on the cases run and hold no run back)"))
    batch: StrictInt = Field(20, ge=1, le=100_000, description=(
        "cases generated and graded between two looks at the confidence sequences"))
    seed: StrictInt = Field(0, ge=0, description="the seed of the order the cases are run in")


# ---- conversations ---------------------------------------------------------------------------
class ConversationCfg(Strict):
    """``conversation``: what a conversation's turn is given as history
    (docs/conversations.md)."""

    history: Literal["reference", "own"] = Field("reference", description=(
        "reference: the earlier turns' questions and reference answers (the frozen prefix: "
        "every system answers the same conversation, so comparisons stay paired); own: the "
        "system's own earlier answers in this run (a turn waits for the one before it)"))


# ---- metrics -----------------------------------------------------------------------------
class MetricsCfg(Strict):
    cutoffs: list[StrictInt] = Field(default_factory=lambda: [1, 3, 5, 10, 20, 50, 100])
    straddle_min_fraction: float = Field(0.5, gt=0, le=1, description=(
        "a quote is held by a hit that covers at least this fraction of its characters"))
    fuzzy_threshold: float = Field(90, ge=0, le=100, description=(
        "rapidfuzz score (0-100) for matching a quote in a hit that cannot be placed in its "
        "document"))

    @model_validator(mode="after")
    def _positive_cutoffs(self):
        if not self.cutoffs or any(c <= 0 for c in self.cutoffs):
            raise ValueError("cutoffs must be a non-empty list of positive integers")
        self.cutoffs = sorted(set(self.cutoffs))
        return self


class RunCfg(Strict):
    """The whole run. Component sections are typed by :func:`run_model`'s subclass."""

    dataset: DatasetCfg
    system: Any
    chunker: Any
    embedder: Any
    reranker: Any
    prompt: PromptCfg
    generator: Any
    grader: Any
    metrics: MetricsCfg
    tracking: Any
    diagnosis: DiagnosisCfg = Field(default_factory=DiagnosisCfg)
    sequential: SequentialCfg = Field(default_factory=SequentialCfg)
    conversation: ConversationCfg = Field(default_factory=ConversationCfg)
    k: StrictInt = Field(5, gt=0, le=10_000, description=(
        "final context size: the chunks that reach the generator (at most 10,000)"))
    candidate_depth: StrictInt = Field(50, gt=0, le=10_000, description=(
        "candidates retrieved before reranking (at least k, at most 10,000)"))
    context_token_budget: StrictInt = Field(1500, gt=0, le=10_000_000, description=(
        "token budget of the final context (whitespace/punctuation word tokens; at most "
        "10,000,000)"))
    cache_dir: str = Field(".raglab-cache", min_length=1, description=(
        "on-disk stage cache (indexes, retrievals, generations, grader verdicts), shared "
        "across runs"))
    concurrency: StrictInt = Field(4, ge=1, le=1024, description=(
        "the number of concurrent system calls (cases answered at once, for every system, "
        "replay included; at most 1024); the http adapter also has its own limit"))
    max_error_rate: float = Field(0.5, ge=0, le=1, description=(
        "exit 1 when more than this share of cases failed (system or grader errors); a run "
        "in which every case failed always exits 1 (README \"Reliability\")"))
    run_name: str | None = Field(None, description=(
        "a name for the run (in a sweep, each job's is it and the job's swept values); "
        "null: the system's kind and the overrides that differ from the defaults"))
    progress: Literal["auto", "bar", "plain", "off"] = "auto"
    plugins: list[str] = Field(default_factory=list, description=(
        "modules that register your own components (see README \"Extending raglab\")"))
    experiment: Any = None
    fail_on_quarantine: bool = Field(False, description=(
        "true: any quarantined case stops the run before work (exit 1, the cases listed), "
        "for CI"))
    llm: LLMCfg = Field(default_factory=LLMCfg, description=(
        "one OpenAI-compatible server (base_url) and the prices of models by name"))

    @model_validator(mode="after")
    def _k_within_depth(self):
        if self.k > self.candidate_depth:
            raise ValueError(f"k ({self.k}) must not exceed "
                             f"candidate_depth ({self.candidate_depth})")
        return self

    @model_validator(mode="after")
    def _one_base_url(self):
        """``llm.base_url`` serves every component with a ``base_url`` of its own unset."""
        if self.llm.base_url:
            for section in (self.grader, self.generator):
                if "base_url" in type(section).model_fields and section.base_url is None:
                    section.base_url = self.llm.base_url
        return self

    def system_sections(self) -> dict[str, Any]:
        """The configuration a system under test receives with each case."""
        return {
            "chunker": self.chunker.model_dump(),
            "embedder": self.embedder.model_dump(),
            "reranker": self.reranker.model_dump(),
            "k": self.k,
            "candidate_depth": self.candidate_depth,
            "context_token_budget": self.context_token_budget,
            "prompt": self.prompt.model_dump(),
            "generator": self.generator.model_dump(),
        }



_MODEL: tuple[int, type[RunCfg]] | None = None


def _choice_type(group: str) -> Any:
    cfgs = [e.config for _, e in sorted(registry.entries(group).items())]
    if len(cfgs) == 1:
        return cfgs[0]
    union = functools.reduce(operator.or_, cfgs)  # A | B | ...: one of the group's schemas
    return Annotated[union, Field(discriminator="name")]


def run_model() -> type[RunCfg]:
    """RunCfg with each component group typed as the union of its registered schemas."""
    global _MODEL
    for group in COMPONENT_GROUPS:
        registry.entries(group)  # import the group's modules (they register themselves)
    gen = registry.generation()
    if _MODEL is None or _MODEL[0] != gen:
        # Any: unpacked into create_model's **field_definitions; a narrower value type
        # would also be checked against its __config__, __doc__, ... keywords
        fields: dict[str, Any] = {g: (_choice_type(g), ...) for g in COMPONENT_GROUPS}
        _MODEL = (gen, create_model("RunCfg", __base__=RunCfg, **fields))
    return _MODEL[1]


_CHOSEN: dict[tuple, type[RunCfg]] = {}


def chosen_model(choices: dict[str, str]) -> type[RunCfg]:
    """RunCfg with each component group typed as its chosen schema alone: validating a run's
    configuration imports only the modules of its choices (an unknown choice is the
    registry's ConfigError, listing the valid ones)."""
    key = (registry.generation(), tuple(sorted(choices.items())))
    model = _CHOSEN.get(key)
    if model is None:
        fields: dict[str, Any] = {g: (registry.entry(g, choices[g]).config, ...)
                                  for g in COMPONENT_GROUPS}  # Any: as in run_model
        key = (registry.generation(), key[1])  # the lookups may have registered modules
        model = _CHOSEN[key] = create_model("RunCfg", __base__=RunCfg, **fields)
    return model


# ---- the schemas' defaults, as Hydra config nodes ------------------------------------------
#: a field's ``json_schema_extra`` marker: left out of its schema's config node, so the
#: composed configuration does not hold it (set it with ``+GROUP.FIELD=VALUE``)
UNLISTED: JsonDict = {"conf": "unlisted"}
#: the run's sections that are config groups of their own, by their schemas
SECTIONS: dict[str, type[BaseModel]] = {"dataset": DatasetCfg, "prompt": PromptCfg,
                                     "metrics": MetricsCfg, "diagnosis": DiagnosisCfg,
                                     "sequential": SequentialCfg,
                                     "conversation": ConversationCfg}
#: RunCfg fields that are config groups (each its own node), not top-level keys
_GROUP_FIELDS = (*COMPONENT_GROUPS, *SECTIONS, "experiment")


def _plain(value: Any) -> Any:
    """A default as a plain YAML-able value (nested models dumped)."""
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return _plain(value.model_dump(by_alias=True))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return value


def schema_node(model: type[Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The config node of a schema: every field (by its alias) with its default, ``???``
    (a value the YAML must give) for a field without one; ``name`` first, then the schema's
    order. Fields in ``skip`` and those marked :data:`UNLISTED` are left out."""
    fields = model.model_fields
    node: dict[str, Any] = {}
    for fname in sorted(fields, key=lambda f: f != "name"):  # stable: the schema's order
        info = fields[fname]
        if fname in skip or (isinstance(info.json_schema_extra, dict)
                             and info.json_schema_extra.get("conf") == UNLISTED["conf"]):
            continue
        node[info.alias or fname] = ("???" if info.is_required()
                                     else _plain(info.get_default(call_default_factory=True)))
    return node


def schema_nodes(extra: dict[str, type[Any]] | None = None) -> dict[str, dict[str, Any]]:
    """``{"schema/GROUP/NAME": node}`` of every registered component, ``{"schema/SECTION":
    node}`` of the run's sections (and of ``extra``'s), ``"schema/run"``: the top-level keys."""
    nodes = {"schema/run": schema_node(RunCfg, skip=_GROUP_FIELDS)}
    for section, model in {**SECTIONS, **(extra or {})}.items():
        nodes[f"schema/{section}"] = schema_node(model)
    for group in COMPONENT_GROUPS:
        for name, e in sorted(registry.entries(group).items()):
            nodes[f"schema/{group}/{name}"] = schema_node(e.config)
    return nodes


def register_schema_defaults(extra: dict[str, type[Any]] | None = None) -> None:
    """Store every schema's defaults in Hydra's ConfigStore (:func:`schema_nodes`), where
    each ``conf/`` file's defaults list pulls its own in (``/schema/chunker/fixed@_here_``):
    the YAML holds only what differs. Call it before composing (idempotent; nothing is
    stored at import). Components registered later (a run's ``plugins``) get no node: their
    YAML files give every value."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    for path, node in schema_nodes(extra).items():
        group, _, name = path.rpartition("/")
        cs.store(group=group, name=name, node=node)


def parse_run_config(data: dict[str, Any]) -> RunCfg:
    """Validate a composed configuration; one clear ConfigError on the first problem."""
    data = {k: v for k, v in data.items() if k != "hydra"}
    plugins = data.get("plugins") or []
    if isinstance(plugins, list):
        registry.import_plugins(str(p) for p in plugins)
    choices = {g: data[g]["name"] for g in COMPONENT_GROUPS
               if isinstance(data.get(g), dict) and isinstance(data[g].get("name"), str)}
    model = chosen_model(choices) if len(choices) == len(COMPONENT_GROUPS) else run_model()
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise config_error(e, data) from None


def parse_section(model: type[Strict], data: Any, prefix: str) -> Any:
    """One config section (``prefix``: its path), with the same one-line errors."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise config_error(e, data if isinstance(data, dict) else {}, prefix) from None


def config_error(e: ValidationError, data: dict[str, Any], prefix: str = "") -> ConfigError:
    """One line for the first problem of a config section (``prefix``: its path)."""
    p = first_problem(e, data=data)
    msg = {"unknown": "unknown key", "missing": "missing value"}.get(p.kind, p.msg)
    loc = ".".join(part for part in (prefix, p.loc) if part)
    return ConfigError(f"config {loc}: {msg}" if loc else f"config: {msg}")
