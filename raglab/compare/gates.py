"""The schema of a gate set (config group ``gates``, read by ``raglab decide``).

A gate set is predeclared in ``conf/gates/NAME.yaml`` (or any YAML file given by path)::

    confidence: 0.95            # level of the paired intervals the gates read
    critical_slices:            # checked by gates with `slices: critical` (overall always)
      - {key: answerable, value: "yes"}
      - {key: intent}           # no value: every value of the tag key
    gates:
      - {metric: vital_nugget_recall, rule: non_inferior, margin: 0.02, slices: critical}
      - {metric: acl_leak_rate, rule: bound, max: 0}
      - {metric: contradicted_claim_rate, rule: not_worse}
      - {metric: false_refusal_rate, rule: bound, max: 0.2, max_increase: 0.05}
      - {metric: latency_ms.total, rule: bound, max: 2000}

Rules (``delta`` = candidate - baseline over the paired cases, ``[ci_low, ci_high]`` its
interval at ``confidence``). Every check has three outcomes: ``pass`` (the data show the
requirement), ``fail`` (the data show its breach) and ``inconclusive`` (neither: more cases
would settle it; the check says how many, raglab.stats.settle):

- ``non_inferior`` (``margin`` >= 0): the candidate is not worse by ``margin`` or more. Where
  higher is better: ``pass`` when ``ci_low > -margin``, ``fail`` when the whole interval is
  below ``-margin`` (``ci_high < -margin``), else ``inconclusive``; the mirror where lower is
  better. With the 95% interval each side is a one-sided test at 2.5%.
- ``not_worse`` (``margin`` >= 0, default 0): ``fail`` when the candidate is shown worse than
  the baseline by more than ``margin``, else ``pass``: the one-sided test of ``delta <
  -margin`` (``> margin`` where lower is better) whose inversion is the metric's interval
  (raglab.stats.paired.one_sided), its p-values adjusted by Holm across the gate set's
  ``not_worse`` checks, below ``(1 - confidence) / 2``: the level of each side of the
  interval, so that without Holm a single check fails exactly when its interval lies wholly
  beyond the margin. Unlike ``non_inferior``, which passes only when the data show the
  candidate is no worse than the margin (the burden of proof on the candidate), ``not_worse``
  is never inconclusive: it fails only when the data show harm (the burden on the evidence
  of harm).
- ``bound``: any of ``max`` / ``min`` on the candidate's value and ``max_increase`` /
  ``max_decrease`` (>= 0) on ``delta``; every one given must hold (pass or fail: a limit on
  the candidate's own value, such as ``acl_leak_rate`` max 0, is a fact of the run, and one
  leak fails it). Budgets (latency, cost) and absolute limits are bounds. ``by: interval``
  judges ``max_increase`` / ``max_decrease`` on the interval instead of the estimate:
  ``pass`` when the interval is within the bound (``ci_high <= max_increase``, ``ci_low >=
  -max_decrease``), ``fail`` when it lies wholly beyond it, else ``inconclusive``.

Power: each ``non_inferior`` and ``not_worse`` check states the minimum detectable effect of
its slice (``mde``): the smallest true difference its test detects with 80% power, from the
comparison's row (raglab.stats.paired: the power of the row's own test, planned at the
observed share of changed cases), rescaled to the check's level. A ``non_inferior`` margin
below it is ``underpowered``, which warns (``underpowered: warn``, the default) or fails a
passing check (``underpowered: fail``). A ``bound`` check is ``underpowered`` when it rests
on fewer than ``min_n`` paired cases (default 30), or when it bounds a change
(``max_increase`` / ``max_decrease``) and the interval of that change is wider than the bound
(its slack: a change of 0.05 cannot be told from one of 0.5 with an interval [+0, +1]).

A gate whose metric applies to no case of either run (in a slice) is ``n/a`` and does not
block, unless ``required: true``, which makes it fail.

``estimator: ppi`` (rules ``non_inferior`` and ``bound``, on a metric people can label)
judges the gate on the human scale: the prediction-powered difference from the labels
stored in both runs (raglab.compare.human) replaces the judge's row, and a ``max`` /
``min`` bound reads the candidate's human-scale mean. ``raglab decide`` refuses (one line,
exit 2) when those labels are missing, stale, made under another metric version, not
finished, or too few in a checked slice.

``min_kappa: {FAMILY: KAPPA}`` (optional) asks how far the judge is trusted: a gated family
(one that a gate of the set reads, and that applied) whose grader version has no calibration
(``raglab calibrate``), or whose latest calibration's one-sided 95% lower confidence bound
of Cohen's kappa is below KAPPA, fails the decision. A calibration whose labels came from
another dataset than the candidate's (by the cases sha256) counts as uncalibrated unless
``calibration_from: any``. FAMILY is a family that human labels calibrate (claim labels:
faithfulness, citations, correctness; nugget labels: nuggets).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from raglab.errors import UserError
from raglab.metrics.catalog import CALIBRATED_BY, FAMILIES, spec_of

Rule = Literal["non_inferior", "not_worse", "bound"]
#: what a check of a gate is, and what the decision is (raglab.compare.decide)
PASS, FAIL, INCONCLUSIVE, NA = "pass", "fail", "inconclusive", "n/a"
#: the end of the reason of a check a sequential run's confidence sequence decided
ANYTIME = "(anytime-valid, sequential run)"
GO, NO_GO, INCONCLUSIVE_DECISION = "GO", "NO-GO", "INCONCLUSIVE"
_BOUNDS = ("max", "min", "max_increase", "max_decrease")


class _C(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SliceRef(_C):
    key: str = Field(min_length=1)
    value: str | None = None  # None: every value of the key

    @model_validator(mode="before")
    @classmethod
    def _value_as_text(cls, data: Any) -> Any:
        # YAML reads `value: yes` / `value: 3` as a bool / int; slice values are text
        if isinstance(data, dict) and isinstance(data.get("value"), bool):
            data = {**data, "value": "yes" if data["value"] else "no"}
        elif isinstance(data, dict) and isinstance(data.get("value"), (int, float)):
            data = {**data, "value": str(data["value"])}
        return data

    def label(self) -> str:
        return f"{self.key}={self.value}" if self.value is not None else f"{self.key}=*"


class Gate(_C):
    metric: str = Field(min_length=1)
    rule: Rule
    margin: float | None = Field(None, ge=0, allow_inf_nan=False)
    max: float | None = Field(None, allow_inf_nan=False)  # .inf: no bound, leave it out
    min: float | None = Field(None, allow_inf_nan=False)
    max_increase: float | None = Field(None, ge=0, allow_inf_nan=False)
    max_decrease: float | None = Field(None, ge=0, allow_inf_nan=False)
    by: Literal["estimate", "interval"] = "estimate"
    slices: Literal["overall", "critical"] = "overall"
    required: bool = False
    label: str | None = None
    #: "judge": the judge's paired difference (the comparison's row); "ppi": the
    #: prediction-powered difference on the human scale from labels in both runs
    #: (raglab.compare.human; non_inferior and bound rules)
    estimator: Literal["judge", "ppi"] = "judge"

    @field_validator("metric")
    @classmethod
    def _known(cls, metric: str) -> str:
        if spec_of(metric) is None:
            raise ValueError(f"unknown metric {metric!r} (see docs/metrics.md)")
        return metric

    @model_validator(mode="after")
    def _consistent(self):
        spec = spec_of(self.metric)
        assert spec is not None
        given = [b for b in _BOUNDS if getattr(self, b) is not None]
        if self.rule == "non_inferior" and self.margin is None:
            raise ValueError("rule non_inferior needs a margin")
        if self.rule == "bound" and self.margin is not None:
            raise ValueError("margin applies to rules non_inferior and not_worse, not bound")
        if self.by == "interval" and (self.rule != "bound" or (
                self.max_increase is None and self.max_decrease is None)):
            raise ValueError("by: interval applies to rule bound with max_increase or "
                             "max_decrease")
        if self.rule == "bound" and not given:
            raise ValueError(f"rule bound needs at least one of {', '.join(_BOUNDS)}")
        if self.rule != "bound" and given:
            raise ValueError(f"{given[0]} applies to rule bound only, not {self.rule}")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min:g} is above max {self.max:g}: no value passes")
        if self.rule in ("non_inferior", "not_worse") and spec.direction == "none":
            raise ValueError(f"{self.metric} has no better direction; use rule bound")
        if self.estimator == "ppi":
            if self.rule == "not_worse":
                raise ValueError("estimator: ppi applies to rules non_inferior and bound "
                                 "(its interval), not not_worse")
            from raglab.labels.store import labelled_spec

            try:
                labelled_spec(self.metric)
            except UserError as e:
                raise ValueError(f"estimator: ppi: {e.message}") from None
        return self

    @property
    def direction(self) -> str:
        spec = spec_of(self.metric)
        assert spec is not None
        return spec.direction

    def title(self) -> str:
        return self.label or f"{self.metric} {self.rule}"


class GateSet(_C):
    description: str = ""
    confidence: float = Field(0.95, gt=0, lt=1)
    critical_slices: list[SliceRef] = Field(default_factory=list)
    gates: list[Gate] = Field(min_length=1)
    #: family -> the lowest Cohen's kappa of its grader version's latest calibration
    min_kappa: dict[str, float] = Field(default_factory=dict)
    #: an underpowered check (a non_inferior margin below its minimum detectable effect; a
    #: bound on fewer than ``min_n`` paired cases or with an interval wider than its slack)
    underpowered: Literal["warn", "fail"] = "warn"
    #: "same": a min_kappa calibration must come from the candidate's dataset (by its cases
    #: sha256), else it counts as uncalibrated; "any": a calibration from any dataset
    calibration_from: Literal["same", "any"] = "same"
    #: the fewest paired cases a bound check trusts
    min_n: int = Field(30, ge=1)

    @field_validator("min_kappa")
    @classmethod
    def _calibrated_families(cls, v: dict[str, float]) -> dict[str, float]:
        for fam, kappa in v.items():
            if fam not in CALIBRATED_BY:
                why = ("no human labels calibrate it" if fam in FAMILIES
                       else "unknown metric family")
                raise ValueError(f"{fam!r}: {why} (families with a calibration: "
                                 f"{', '.join(CALIBRATED_BY)})")
            if not -1 <= kappa <= 1:
                raise ValueError(f"{fam}: {kappa:g} is not a kappa (from -1 to 1)")
        return v

    @property
    def alpha(self) -> float:
        return round(1.0 - self.confidence, 12)


def parse_gate_set(data: Any, source: str) -> GateSet:
    """Validate a gate set; one UserError line naming ``source`` and the field on failure."""
    if not isinstance(data, dict):
        raise UserError("a gate set must be a mapping with a `gates` list", file=source)
    try:
        return GateSet.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "missing value"
        raise UserError(f"{loc}: {msg}" if loc else msg, file=source) from None


#: the defaults list a shipped gate set starts with (the schema's defaults, then the file)
_SCHEMA_DEFAULTS = ("/schema/gates@_here_", "_self_")


def _without_schema_defaults(raw: dict, source: str) -> dict:
    """A file copied from a shipped gate set starts with its Hydra defaults list, which
    says "the schema's defaults, then this file": what a file given by path gets anyway.
    That list is dropped; any other (another set to start from) is refused, one line."""
    defaults = raw.get("defaults")
    if not isinstance(defaults, list) or not set(map(str, defaults)) <= set(_SCHEMA_DEFAULTS):
        raise UserError("defaults: a gate set given by path cannot start from another set; "
                        "copy the gates it needs into this file (the shipped sets' "
                        f"defaults list, {list(_SCHEMA_DEFAULTS)}, may stay)", file=source)
    return {k: v for k, v in raw.items() if k != "defaults"}


def gate_set_names(conf_root: Any) -> list[str]:
    from pathlib import Path

    return sorted(p.stem for p in (Path(conf_root) / "gates").glob("*.yaml"))


def load_gate_set(name: str, overrides: list[str], conf_root: Any) -> tuple[str, GateSet, str]:
    """``(name, gate set, source)`` of ``gates=NAME`` (a file of ``conf/gates/``, composed by
    Hydra with ``gates.FIELD=VALUE`` overrides) or of ``gates=PATH.yaml``."""
    from pathlib import Path

    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    path = Path(name).expanduser()
    if name.endswith((".yaml", ".yml")) or "/" in name:
        if not path.is_file():
            raise UserError(f"gates={name}: no such gates file")
        from raglab.data.yaml_io import load_yaml_file

        raw = load_yaml_file(path)  # bounded: a file of aliases is refused, one line
        if raw is not None and not isinstance(raw, dict):  # (create() would parse a str)
            raise UserError("a gate set must be a mapping with a `gates` list", file=str(path))
        if raw is not None and "defaults" in raw:
            raw = _without_schema_defaults(raw, str(path))
        try:
            cfg: Any = OmegaConf.create(raw if raw is not None else {})
            for o in overrides:  # (update, not merge: a key may index a list, gates.0.margin)
                key, _, value = o.removeprefix("+").removeprefix("gates.").partition("=")
                OmegaConf.update(cfg, key, OmegaConf.from_dotlist([f"v={value}"])["v"],
                                 force_add=True)
            data = OmegaConf.to_container(cfg, resolve=True)
        except (OmegaConfBaseException, ValueError) as e:
            raise UserError(" ".join(str(e).split()), file=str(path)) from None
        return path.stem, parse_gate_set(data, str(path)), str(path)
    names = gate_set_names(conf_root)
    if name not in names:
        raise UserError(f"gates={name}: unknown gate set (available: "
                        f"{', '.join(names) or 'none'}; or give a path to a YAML file)")
    from hydra import compose, initialize_config_dir
    from hydra.core.config_store import ConfigStore
    from hydra.errors import HydraException

    from raglab.config import schema_node

    # the defaults a shipped set starts from (its file holds what differs)
    ConfigStore.instance().store(group="schema", name="gates", node=schema_node(GateSet))
    source = str(Path(conf_root) / "gates" / f"{name}.yaml")
    from raglab.data.yaml_io import load_yaml_file

    load_yaml_file(source)  # refused before Hydra expands its aliases
    try:
        with initialize_config_dir(config_dir=str(conf_root), version_base="1.3"):
            cfg = compose(config_name=None, overrides=[f"+gates={name}", *overrides])
        container = OmegaConf.to_container(cfg, resolve=True)
        data = container.get("gates") if isinstance(container, dict) else None
    except (HydraException, OmegaConfBaseException) as e:
        raise UserError(" ".join(str(e).split()), file=source) from None
    return name, parse_gate_set(data, source), source
