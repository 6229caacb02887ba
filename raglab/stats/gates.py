"""The two gate rules decide applies to a ``PairedStat``."""

from __future__ import annotations

from raglab.stats.paired import PairedStat


def _checked(direction: str) -> str:
    if direction not in ("higher", "lower"):
        raise ValueError(f"a gate needs a metric whose direction is 'higher' or 'lower', "
                         f"got {direction!r}")
    return direction


def non_inferior(stat: PairedStat, margin: float, direction: str) -> bool:
    """Non-inferiority at the interval's confidence: the candidate is not worse than the
    baseline by ``margin`` or more. ``higher``: ``ci_low > -margin``; ``lower``:
    ``ci_high < margin``. With the default two-sided 95% interval this is a one-sided test
    at 2.5%. No paired case (``n == 0``) is never non-inferior."""
    from raglab.stats.settle import Condition

    direction = _checked(direction)
    if margin < 0:
        raise ValueError(f"a non-inferiority margin must be >= 0, got {margin}")
    if stat.ci_low is None or stat.ci_high is None:
        return False
    cond = Condition("above", -margin) if direction == "higher" else Condition("below", margin)
    return cond.status(stat.ci_low, stat.ci_high) == "pass"


def significantly_worse(stat: PairedStat, direction: str, alpha: float = 0.05,
                        p: float | None = None) -> bool:
    """The candidate is worse (the difference lies on the metric's bad side) and the
    p-value (``p`` when given, e.g. the multiplicity-adjusted one; else ``stat.p_value``)
    is below ``alpha``. No paired case is never significantly worse."""
    direction = _checked(direction)
    p = stat.p_value if p is None else p
    if p is None or stat.delta is None:
        return False
    bad_side = stat.delta < 0 if direction == "higher" else stat.delta > 0
    return bool(bad_side and p < alpha)
