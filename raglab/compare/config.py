"""The typed schema of the ``compare`` config group (``conf/compare/default.yaml``).

Used by ``raglab compare`` and ``raglab decide``. A noun only: no I/O, no imports beyond
pydantic and the metric declarations.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from raglab.metrics.catalog import FLIP_THRESHOLDS


class CompareCfg(BaseModel):
    model_config = ConfigDict(extra="forbid")

    alpha: float = Field(0.05, gt=0, lt=1, description=(
        "significance level for marking a difference, after multiplicity adjustment"))
    confidence: float = Field(0.95, gt=0, lt=1, description=(
        "level of the paired confidence intervals of each difference"))
    n_bootstrap: int = Field(2000, gt=0, le=100_000, description=(
        "bootstrap resamples (intervals) and permutations (p-values)"))
    seed: int = Field(0, ge=0, le=2**32 - 1, description=(
        "the seed of the bca and percentile intervals; p-values, the bootstrap-t and the "
        "sign-flip intervals come from fixed plans, so the same data give the same figures "
        "whatever the seed and the order of the cases"))
    family_permutations: int = Field(2000, ge=1, le=100_000, description=(
        "random permutations of the randomised Tukey HSD over every pair of a sweep's jobs "
        "(compare SWEEP: the sweep-wide family, seeded with seed)"))
    interval: Literal["auto", "signflip", "bca", "percentile"] = Field("auto", description=(
        "the paired interval: auto chooses by metric kind (the corrected score interval for "
        "pass/fail metrics, on the scaled gain and loss mass for shares, the bootstrap-t for "
        "unbounded graded ones, the cluster sign-flip inversion with compare.cluster); "
        "signflip inverts the "
        "sign-flip permutation test for every metric; bca and percentile are paired "
        "bootstraps"))
    adjust: Literal["holm", "bh"] = Field("holm", description=(
        "multiplicity adjustment of the confirmatory family (the headline metrics overall): "
        "holm (family-wise error) or bh (false discovery rate)"))
    adjust_exploratory: Literal["holm", "bh"] = Field("bh", description=(
        "multiplicity adjustment of the exploratory family (every other metric and every "
        "slice): bh (false discovery rate) or holm"))
    cluster: str | None = Field(None, description=(
        "a tag key whose cases are resampled and permuted together (cases that share a "
        "document, an article or a question template); cases without the tag are their own "
        "cluster. Unset: `conversation` when any case is a conversation's turn, else none; "
        "`none`: no clusters"))
    min_slice_n: int = Field(20, ge=1, description=(
        "slices with fewer paired cases are shown and marked small, never hidden"))
    # metrics whose per-case pass/fail flips are listed, and what "pass" means for each: a
    # higher-is-better metric passes at or above its threshold, a lower-is-better one at or
    # below it. The metrics and their thresholds are declared with the metrics
    # (raglab.metrics.catalog.FLIP_THRESHOLDS); values given here override them (null drops
    # a metric; another metric name adds it).
    flip_thresholds: dict[str, float | None] = Field(default_factory=dict,
                                                     validate_default=True)
    max_flipped: int = Field(50, ge=0, description=(
        "flipped cases listed per metric and direction (the counts are always complete)"))

    @field_validator("flip_thresholds")
    @classmethod
    def _over_declared(cls, given: dict[str, float | None]) -> dict[str, float | None]:
        merged = {**FLIP_THRESHOLDS, **given}
        return {m: t for m, t in merged.items() if t is not None}
