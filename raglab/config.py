"""Typed schemas of every config group (nouns only). One schema per group choice, selected
by its ``name`` (a discriminated union), so a typo fails with the valid choices."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from raglab.errors import ConfigError
from raglab.metrics.diagnosis import DiagnosisCfg


class _C(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# ---- dataset ---------------------------------------------------------------------------
class DatasetCfg(_C):
    name: str = "custom"
    corpus: str
    cases: str
    labels: str | None = None
    fuzzy_threshold: float = Field(90.0, ge=0, le=100)


# ---- system ----------------------------------------------------------------------------
class ReferenceSystemCfg(_C):
    name: Literal["reference"]
    enforce_acl: bool = True


class ReplaySystemCfg(_C):
    name: Literal["replay"]
    path: str


class HttpSystemCfg(_C):
    name: Literal["http"]
    url: str
    connect_timeout_s: float = Field(5.0, gt=0)
    read_timeout_s: float = Field(60.0, gt=0)
    retries: int = Field(3, ge=0)
    backoff_s: float = Field(0.5, ge=0)
    concurrency: int = Field(4, ge=1)
    headers: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _http_url(self):
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        return self


class PythonSystemCfg(_C):
    name: Literal["python"]
    target: str = Field(alias="_target_")
    options: dict[str, Any] = Field(default_factory=dict)


SystemCfg = Annotated[ReferenceSystemCfg | ReplaySystemCfg | HttpSystemCfg | PythonSystemCfg,
                      Field(discriminator="name")]


# ---- chunker ---------------------------------------------------------------------------
class _ChunkerBase(_C):
    size: int = Field(gt=0)
    overlap: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _overlap_below_size(self):
        if self.overlap >= self.size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        return self


class FixedChunkerCfg(_ChunkerBase):
    name: Literal["fixed"]


class SentenceChunkerCfg(_ChunkerBase):
    name: Literal["sentence"]


class RecursiveChunkerCfg(_ChunkerBase):
    name: Literal["recursive"]


ChunkerCfg = Annotated[FixedChunkerCfg | SentenceChunkerCfg | RecursiveChunkerCfg,
                       Field(discriminator="name")]


# ---- embedder --------------------------------------------------------------------------
class Bm25Cfg(_C):
    name: Literal["bm25"]
    k1: float = Field(1.5, gt=0)
    b: float = Field(0.75, ge=0, le=1)


class DenseCfg(_C):
    name: Literal["dense"]
    model: str = "all-MiniLM-L6-v2"
    batch_size: int = Field(64, gt=0)


class HybridCfg(_C):
    name: Literal["hybrid"]
    model: str = "all-MiniLM-L6-v2"
    batch_size: int = Field(64, gt=0)
    k1: float = Field(1.5, gt=0)
    b: float = Field(0.75, ge=0, le=1)
    rrf_k: int = Field(60, gt=0)


EmbedderCfg = Annotated[Bm25Cfg | DenseCfg | HybridCfg, Field(discriminator="name")]


# ---- reranker --------------------------------------------------------------------------
class NoRerankCfg(_C):
    name: Literal["none"]


class LexicalRerankCfg(_C):
    name: Literal["lexical"]
    weight: float = Field(0.5, ge=0, le=1)


class DenseRerankCfg(_C):
    name: Literal["dense"]
    model: str = "all-MiniLM-L6-v2"


RerankerCfg = Annotated[NoRerankCfg | LexicalRerankCfg | DenseRerankCfg,
                        Field(discriminator="name")]


# ---- prompt / generator ----------------------------------------------------------------
class PromptCfg(_C):
    name: str
    system: str = ""
    template: str

    @model_validator(mode="after")
    def _placeholders(self):
        for ph in ("{question}", "{context}"):
            if ph not in self.template:
                raise ValueError(f"prompt template lacks the placeholder {ph}")
        return self


class ExtractiveGenCfg(_C):
    name: Literal["extractive"]
    max_sentences: int = Field(2, gt=0)
    min_score: float = Field(0.35, ge=0, le=1)
    refusal: str


class AnthropicGenCfg(_C):
    name: Literal["anthropic"]
    model: str = Field(min_length=1)
    max_tokens: int = Field(512, gt=0)
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0)
    refusal: str


GeneratorCfg = Annotated[ExtractiveGenCfg | AnthropicGenCfg, Field(discriminator="name")]


# ---- grader ----------------------------------------------------------------------------
class DecompositionCfg(_C):
    max_claims: int = Field(12, gt=0)
    drop_hedges: bool = True


class HeuristicGraderCfg(_C):
    name: Literal["heuristic"]
    support_threshold: float = Field(72, ge=0, le=100)
    nugget_yes: float = Field(75, ge=0, le=100)
    nugget_partial: float = Field(50, ge=0, le=100)
    decomposition: DecompositionCfg = Field(default_factory=DecompositionCfg)
    verification: Literal["batched", "per_claim"] = "batched"


class ClaudeGraderCfg(_C):
    name: Literal["claude"]
    model: str = Field(min_length=1)
    max_tokens: int = Field(2048, gt=0)
    prompts: str
    decomposition: DecompositionCfg = Field(default_factory=DecompositionCfg)
    verification: Literal["batched", "per_claim"] = "batched"
    concurrency: int = Field(8, ge=1)
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(5, ge=0)
    mode: Literal["online", "batch"] = "online"
    batch_poll_s: float = Field(30.0, gt=0)
    prices: dict[str, float] = Field(default_factory=dict)


class NoGraderCfg(_C):
    name: Literal["none"]


GraderCfg = Annotated[HeuristicGraderCfg | ClaudeGraderCfg | NoGraderCfg,
                      Field(discriminator="name")]


# ---- metrics / tracking / compare ------------------------------------------------------
class MetricsCfg(_C):
    cutoffs: list[int] = Field(default_factory=lambda: [1, 3, 5, 10, 20, 50, 100])
    straddle_min_fraction: float = Field(0.5, gt=0, le=1)
    fuzzy_threshold: float = Field(90.0, ge=0, le=100)

    @model_validator(mode="after")
    def _positive_cutoffs(self):
        if not self.cutoffs or any(c <= 0 for c in self.cutoffs):
            raise ValueError("cutoffs must be a non-empty list of positive integers")
        self.cutoffs = sorted(set(self.cutoffs))
        return self


class TrackingCfg(_C):
    name: Literal["mlflow", "none"]
    uri: str | None = None
    experiment: str | None = None


from raglab.report.compare_config import CompareCfg  # noqa: E402  (schema lives with compare)


class RunCfg(_C):
    dataset: DatasetCfg
    system: SystemCfg
    chunker: ChunkerCfg
    embedder: EmbedderCfg
    reranker: RerankerCfg
    prompt: PromptCfg
    generator: GeneratorCfg
    grader: GraderCfg
    metrics: MetricsCfg
    tracking: TrackingCfg
    compare: CompareCfg = Field(default_factory=CompareCfg)
    diagnosis: DiagnosisCfg = Field(default_factory=DiagnosisCfg)
    k: int = Field(gt=0)
    candidate_depth: int = Field(gt=0)
    context_token_budget: int = Field(1500, gt=0)
    cache_dir: str = ".raglab-cache"
    concurrency: int = Field(4, ge=1)
    run_name: str | None = None
    progress: Literal["auto", "bar", "plain", "off"] = "auto"
    experiment: Any = None

    @model_validator(mode="after")
    def _k_within_depth(self):
        if self.k > self.candidate_depth:
            raise ValueError(f"k ({self.k}) must not exceed candidate_depth ({self.candidate_depth})")
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


def parse_run_config(data: dict[str, Any]) -> RunCfg:
    """Validate a composed configuration; one clear ConfigError on the first problem."""
    data = {k: v for k, v in data.items() if k != "hydra"}
    try:
        return RunCfg.model_validate(data)
    except ValidationError as e:
        raise config_error(e, data) from None


def config_error(e: ValidationError, data: dict[str, Any], prefix: str = "") -> ConfigError:
    """One line for the first problem of a config section (``prefix``: its path)."""
    err = e.errors()[0]
    parts = [str(p) for p in err["loc"]]
    # drop the union tag pydantic inserts (system.replay.path -> system.path)
    if len(parts) >= 2 and isinstance(data.get(parts[0]), dict) \
            and parts[1] == data[parts[0]].get("name"):
        del parts[1]
    loc = ".".join([prefix, *parts] if prefix else parts)
    msg = err["msg"]
    if err["type"] == "union_tag_invalid":
        msg = (f"unknown choice {err['input'].get('name')!r} "
               f"(valid: {err['ctx']['expected_tags']})")
    elif err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "missing":
        msg = "missing value"
    return ConfigError(f"config {loc}: {msg}" if loc else f"config: {msg}")

