"""Planning how many labels a prediction-powered estimate needs (``raglab label --plan``).

The fewest labels ``n`` (at least ``min_labels``) whose expected interval ``2 t_{n-1}
se(n)`` is at most a target width, with ``se(n)`` and ``lam(n)`` from the formulas of
:mod:`raglab.stats.ppi` and the variances and covariance of people and judge seen so far
(:func:`planned_se`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from raglab.stats.ppi import MIN_LABELS, _parts, _z, ppi_mean


@dataclass(frozen=True)
class LabelPlan:
    """How many labels a target interval width needs (:func:`labels_needed`)."""
    width: float                 # the target: full width of the 1 - alpha interval
    labels_needed: int | None    # total labels for it; None: not reachable (every case)
    more: int | None             # labels still to make (labels_needed - n_labelled, >= 0)
    n_labelled: int              # labels so far
    n_all: int                   # cases the judge scored (the most that can be labelled)
    lam: float                   # the power-tuning weight at labels_needed (or at n_all)
    planned_width: float         # the width expected at labels_needed (or at n_all)
    width_now: float             # the width expected at the labels so far
    n_effective: float           # labels alone that would match it (at labels_needed)
    var_human: float             # moments seen so far, the plan's inputs
    var_judge: float
    cov: float


def planned_se(var_human: float, var_judge: float, cov: float, n: int, n_all: int,
               var_judge_labelled: float | None = None) -> tuple[float, float]:
    """``(se, lam)`` of the power-tuned estimate with ``n`` of ``n_all`` cases labelled
    (``M = n_all - n``): ``lam = clip(cov / ((1 + n / M) var_judge), 0, 1)`` as
    :func:`ppi_mean` tunes it, ``se^2 = lam^2 var_judge / M + var(Y - lam f) / n`` with
    ``var(Y - lam f) = var_human - 2 lam cov + lam^2 var_judge_labelled`` (the judge's
    variance on the labelled cases, ``var_judge`` when not given: with the labels' own
    covariance matrix the residual variance is never negative)."""
    m = n_all - n
    vl = var_judge if var_judge_labelled is None else var_judge_labelled
    if m <= 0 or not var_judge > 0:
        lam = 0.0
    else:
        lam = min(max(cov / ((1.0 + n / m) * var_judge), 0.0), 1.0)
    rect = max(var_human - 2.0 * lam * cov + lam * lam * vl, 0.0)
    var = rect / n + (lam * lam * var_judge / m if m > 0 else 0.0)
    return math.sqrt(var), lam


def plan_from_moments(var_human: float, var_judge: float, cov: float, n_all: int,
                      width: float, *, alpha: float = 0.05, n_labelled: int = 0,
                      min_labels: int = MIN_LABELS,
                      var_judge_labelled: float | None = None) -> LabelPlan:
    """The fewest labels (of ``n_all`` cases) whose power-tuned interval is expected to be
    at most ``width`` wide: ``2 t_{n-1} se(n) <= width`` with :func:`planned_se`, the
    smallest such ``n``, at least ``min_labels`` (``se(n)`` and ``t`` fall as ``n`` grows).
    Planned on the
    symmetric interval: the skewness correction moves its ends, not much its width.
    ``n_labelled``: labels made so far (for ``more`` and ``width_now``)."""
    from scipy.stats import t as student_t

    _z(alpha)
    if not width > 0 or not math.isfinite(width):
        raise ValueError(f"width must be a positive number, not {width!r}")
    first = max(min_labels, 2)
    if n_all < first:
        raise ValueError(f"planning needs at least {first} cases")
    for name, v in (("var_human", var_human), ("var_judge", var_judge), ("cov", cov)):
        if not math.isfinite(v):
            raise ValueError(f"{name} must be finite")
    ns = np.arange(first, n_all + 1)
    q = student_t.ppf(1.0 - alpha / 2.0, ns - 1)
    ses, lams = zip(*(planned_se(var_human, var_judge, cov, int(k), n_all,
                                 var_judge_labelled) for k in ns))
    widths = 2.0 * q * np.asarray(ses)
    ok = np.flatnonzero(widths <= width)
    at = int(ok[0]) if ok.size else len(ns) - 1
    needed = int(ns[at]) if ok.size else None
    se = float(ses[at])
    n_eff = float(min(var_human / se ** 2, n_all)) if se > 0 else float(ns[at])
    if 2 <= n_labelled <= n_all:
        q_now = float(student_t.ppf(1.0 - alpha / 2.0, n_labelled - 1))
        now = 2.0 * q_now * planned_se(var_human, var_judge, cov, n_labelled, n_all,
                                       var_judge_labelled)[0]
    else:
        now = float("inf")
    return LabelPlan(width=float(width), labels_needed=needed,
                     more=None if needed is None else max(needed - n_labelled, 0),
                     n_labelled=n_labelled, n_all=n_all, lam=float(lams[at]),
                     planned_width=float(widths[at]), width_now=now, n_effective=n_eff,
                     var_human=float(var_human), var_judge=float(var_judge), cov=float(cov))


def labels_needed(human, judge_labelled, judge_all, *, width: float, alpha: float = 0.05,
                  min_labels: int = MIN_LABELS,
                  bounds: tuple[float, float] | None = None) -> LabelPlan:
    """The labels needed for a ``1 - alpha`` interval of at most ``width`` (full width) on
    the mean of a metric, given the judge's agreement with the labels so far (arguments as
    :func:`ppi_mean`; a paired difference: per-case differences). The human variance and
    the human-judge covariance come from the labels so far (``count - 1``), the judge's
    variance from every case (for ``lam`` and the judge's own term) and from the labelled
    ones (for the residual), as :func:`ppi_mean` computes them. ``width_now`` is the width
    of the interval :func:`ppi_mean` reports on the labels so far (with ``bounds``), which
    the skewness correction can make wider than the symmetric one the plan assumes.
    :class:`TooFewLabels` below ``min_labels`` labels: label a first batch, then plan."""
    p = _parts(human, judge_labelled, judge_all, min_labels)
    var_human = float(p.y.var(ddof=1))
    var_judge = float(np.concatenate([p.f, p.u]).var(ddof=1))
    cov = float(np.cov(p.y, p.f)[0, 1])
    plan = plan_from_moments(var_human, var_judge, cov, p.n_all, width, alpha=alpha,
                             n_labelled=p.y.size, min_labels=min_labels,
                             var_judge_labelled=float(p.f.var(ddof=1)))
    now = ppi_mean(human, judge_labelled, judge_all, alpha=alpha, min_labels=min_labels,
                   bounds=bounds)
    return replace(plan, width_now=float(now.ci_high - now.ci_low))
