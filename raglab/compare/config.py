"""The typed schema of the ``compare`` config group (``conf/compare/default.yaml``).

Used by ``raglab compare`` and ``raglab decide``. A noun only: no I/O, no imports beyond
pydantic, so any layer may import it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: headline metrics whose per-case pass/fail flips are listed, and what "pass" means for each:
#: a higher-is-better metric passes at or above its threshold, a lower-is-better one at or
#: below it (``false_refusal_rate``/``false_answer_rate`` are the abstention pair).
DEFAULT_FLIP_THRESHOLDS = {
    "vital_nugget_recall": 1.0,
    "faithfulness": 1.0,
    "final.evidence_recall": 1.0,
    "false_refusal_rate": 0.0,
    "false_answer_rate": 0.0,
}


class CompareCfg(BaseModel):
    model_config = ConfigDict(extra="forbid")

    alpha: float = Field(0.05, gt=0, lt=1)             # significance level after adjustment
    confidence: float = Field(0.95, gt=0, lt=1)        # level of the paired intervals
    n_bootstrap: int = Field(2000, gt=0)               # bootstrap / permutation resamples
    seed: int = 0                                      # resampling seed (results reproduce)
    adjust: Literal["holm", "bh"] = "holm"             # across the metric x slice family
    min_slice_n: int = Field(20, ge=1)                 # smaller slices are marked "small"
    flip_thresholds: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_FLIP_THRESHOLDS))
    max_flipped: int = Field(50, ge=0)                 # flipped cases listed per metric
