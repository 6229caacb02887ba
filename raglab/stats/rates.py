"""One-sided exact tests of a binomial rate (``k`` events in ``n`` independent units), for
alerts that must not fire on the noise of a small sample.

- :func:`rate_above`: is the rate above a fixed threshold? The exact (Clopper-Pearson)
  one-sided lower confidence bound of ``k / n`` at ``confidence``; the rate is above the
  threshold when the bound is. Equivalently the one-sided exact binomial test
  ``P(X >= k | n, threshold) < 1 - confidence``, which decides (the bound is above the
  threshold exactly when the test rejects, but for a bound equal to the threshold).
- :func:`rate_above_baseline`: is the rate above a baseline's rate? The one-sided Fisher
  exact test of the 2 x 2 table (conditional on the total events; valid at any sample
  size, conservative).
- ``min_units_*``: the smallest ``n`` at which the test can reject at all (every unit an
  event, and no baseline event): below it a window is untested, never passing.

Both tests hold their level at every ``n``: under the null, a share of at most
``1 - confidence`` of samples alert. Imports scipy lazily, inside the functions.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RateTest:
    rate: float | None          # k / n (None when n == 0)
    ci_low: float | None        # one-sided lower bound at the confidence (fixed threshold)
    p_value: float | None       # one-sided
    reject: bool                # the rate is above the threshold (or the baseline's rate)


def _alpha(confidence: float) -> float:
    """``1 - confidence`` without the floating-point residue (1 - 0.95 is 0.050000000000000044,
    which would let a tie at the threshold reject)."""
    return round(1 - confidence, 12)


def _check(k: int, n: int) -> None:
    if not 0 <= k <= n:
        raise ValueError(f"rate test: need 0 <= k <= n, got k={k}, n={n}")


def lower_bound(k: int, n: int, confidence: float) -> float:
    """Exact one-sided (Clopper-Pearson) lower confidence bound of a binomial rate."""
    from scipy.stats import beta

    _check(k, n)
    if n == 0 or k == 0:
        return 0.0
    return float(beta.ppf(_alpha(confidence), k, n - k + 1))


def rate_above(k: int, n: int, threshold: float, confidence: float) -> RateTest:
    """Exact one-sided test that the rate of ``k`` events in ``n`` exceeds ``threshold``."""
    from scipy.stats import binom

    _check(k, n)
    if n == 0:
        return RateTest(None, None, None, False)
    p = 1.0 if k == 0 else float(binom.sf(k - 1, n, threshold))
    return RateTest(k / n, lower_bound(k, n, confidence), p, p < _alpha(confidence))


def rate_above_baseline(k: int, n: int, base_k: int, base_n: int,
                        confidence: float) -> RateTest:
    """One-sided Fisher exact test that ``k / n`` exceeds the baseline's ``base_k / base_n``."""
    from scipy.stats import fisher_exact

    _check(k, n)
    _check(base_k, base_n)
    if n == 0 or base_n == 0:
        return RateTest(k / n if n else None, None, None, False)
    table = [[k, n - k], [base_k, base_n - base_k]]
    p = float(fisher_exact(table, alternative="greater").pvalue)
    return RateTest(k / n, None, p, p < _alpha(confidence))


def min_units_above(threshold: float, confidence: float) -> int:
    """The smallest ``n`` whose test against ``threshold`` can reject (at ``k == n`` the
    p-value is ``threshold ** n``); 0 when no ``n`` can (threshold 1)."""
    if threshold >= 1:
        return 0
    alpha, n = _alpha(confidence), 1
    while threshold ** n >= alpha:
        n += 1
    return n


def can_reject_vs_baseline(n: int, base_n: int, confidence: float) -> bool:
    """Whether the baseline test of ``n`` units against ``base_n`` can reject at all (the
    most extreme table: every window unit an event, no baseline event)."""
    if n == 0 or base_n == 0:
        return False
    return rate_above_baseline(n, n, 0, base_n, confidence).reject
