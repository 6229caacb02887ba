"""What a metric declaration says (:class:`MetricSpec`). Each metric is declared once, next
to the code that computes it (``DECLARED`` of raglab.metrics.retrieval, generation,
operational and aggregate); raglab.metrics.catalog collects them and derives every list of
metric names from them.

A declaration gives the metric's name (a stage prefix ``candidate.``/``final.`` and an
``@k`` cutoff are part of the name where ``at_k`` says so; a ``*`` stands for any stage name),
its family (whose metric version covers it; ``None`` for operational figures that no grader
or judging rule changes), the direction in which it is better, its kind (what one case's
value is), its headline rank (display order among the headline metrics; ``None``: not a
headline metric) and its one-line meaning.

Kinds (the value of one case):
- ``share``: a score in [0, 1] (a fraction, a reciprocal rank, a graded gain);
- ``binary``: 0 or 1, a pass/fail (paired tests use the score test and interval);
- ``rank``: a 1-based rank;
- ``count``: a count (tokens);
- ``latency``: milliseconds;
- ``cost``: US dollars;
- ``ratio``: a ratio of two means, one value per run (1: no difference).

Reporters: ``run`` (per case: records.jsonl, metrics.json), ``monitor`` (per window of
``raglab monitor``), ``conversations`` (one value per run with conversations, from its
turn records: metrics.json's ``conversations`` section and ``overall``;
raglab.metrics.conversation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Direction = Literal["higher", "lower", "none"]
Kind = Literal["share", "binary", "rank", "count", "latency", "cost", "ratio"]
Reporter = Literal["run", "monitor", "conversations"]
STAGES = ("candidate", "final")


@dataclass(frozen=True)
class MetricSpec:
    name: str                 # "final.ndcg" (also at each cutoff when at_k), "latency_ms.*"
    family: str | None        # metric-version family; None: operational, unversioned
    direction: Direction
    kind: Kind
    headline: int | None      # rank among the headline metrics (1 first); None: not headline
    meaning: str
    at_k: bool = False        # also reported at each cutoff as NAME@k
    #: rank among the metrics whose per-case pass/fail flips a comparison lists (None: not
    #: listed); a case passes when its value is perfect (:attr:`flip_threshold`)
    flip: int | None = None
    #: the kind of grader verdict its value is computed from ("claim", "nugget", "rubric",
    #: "decomposition"); None: computed by rules from the labels and the output alone
    judged: str | None = None
    #: what reports it: "run" (records.jsonl, metrics.json) and/or "monitor" (per window),
    #: or "conversations" (once per run with conversations)
    reported_by: tuple[Reporter, ...] = ("run",)

    def __post_init__(self) -> None:
        if self.flip is not None and self.direction == "none":
            raise ValueError(f"{self.name}: a flip metric needs a direction")

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "higher"

    @property
    def flip_threshold(self) -> float | None:
        """The default pass threshold of a flip metric: a higher-is-better one passes at or
        above 1.0, a lower-is-better one at or below 0 (``compare.flip_thresholds``
        overrides it)."""
        if self.flip is None:
            return None
        return 1.0 if self.higher_is_better else 0.0


def stage_metrics(base: str, family: str, direction: Direction, kind: Kind, meaning: str,
                  headline: dict[str, int] | None = None, flip: dict[str, int] | None = None,
                  at_k: bool = True) -> tuple[MetricSpec, ...]:
    """One declaration per stage (``candidate.BASE``, ``final.BASE``); ``headline`` and
    ``flip`` give a stage its rank."""
    return tuple(MetricSpec(f"{s}.{base}", family, direction, kind, (headline or {}).get(s),
                            meaning, at_k, flip=(flip or {}).get(s)) for s in STAGES)
