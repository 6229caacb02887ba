"""Paired statistics for comparing a candidate run with a baseline, metric by metric.

Inputs are per-case metric values of both runs aligned on case ids; a metric that does not
apply to a case in a run is NaN, and each metric is compared over the cases where it
applies in both runs (``n``). Imports only numpy, scipy (lazily, inside functions) and the
standard library.

Methods (``paired_table``):

- Difference: ``delta = mean(candidate) - mean(baseline)`` over the ``n`` paired cases,
  i.e. the mean of the per-case differences ``d_i``. Wins, ties and losses count the cases
  where the candidate is better, equal (``|d_i| <= 1e-12 max(|b_i|, |c_i|)``) or worse by
  the metric's direction (``none``: a win is a higher value).
- Interval: paired nonparametric bootstrap of the mean difference (cases resampled with
  replacement, both runs together), ``n_resamples`` replicates (2,000 by default), BCa
  (bias-corrected and accelerated, Efron & Tibshirani 1993, ch. 14, as scipy's
  ``bootstrap(method='BCa')``) where valid, the percentile interval otherwise. BCa is
  used when ``n >= 10``, the differences are not all equal, the bias correction and the
  jackknife acceleration (closed form for a mean) are finite, and the adjusted levels stay
  inside the bootstrap distribution (see ``resample.bootstrap_interval``). When every
  difference is equal the interval is ``[delta, delta]`` (``degenerate``); ``n == 0``
  gives no interval and no p-value (``none``).
- Test, two-sided: ``binary`` metrics (per-case pass/fail) use the exact McNemar test,
  i.e. the binomial test at 1/2 of the discordant pairs (``mcnemar-exact``; 1 when there
  is none). Other kinds use a paired sign-flip permutation test of the mean difference,
  which assumes only that under the null each case's difference is symmetric about zero:
  exact enumeration of the ``2**n`` sign vectors when ``2**n <= n_resamples``
  (``permutation-exact``), else ``n_resamples`` random sign vectors with the
  ``(b + 1) / (m + 1)`` correction (``permutation``), which keeps the p-value valid.
  Where fewer than 10 random sign vectors reach the observed sum (p below the Monte Carlo
  resolution, which a Holm family of hundreds of rows needs), the tail of the same
  permutation distribution is computed: enumerated up to n = 20, else by its saddlepoint
  approximation (``resample.saddlepoint_tail``). p-values are never 0: an underflow reads
  as the smallest positive double.
- Multiplicity (``adjust_pvalues``): Holm's step-down adjustment across the metric x slice
  family by default (family-wise error control under any dependence), Benjamini-Hochberg
  on request (false discovery rate).
- Gates: ``non_inferior`` (the interval's bound beyond ``-margin``: a one-sided 2.5% test
  with the 95% interval) and ``significantly_worse`` (the difference on the bad side with
  a p-value, adjusted when given, under ``alpha``).

Speed: columns with the same ``n`` share one resample stream and are resampled together
as matrix products (bootstrap replicates are ``counts @ D``, sign flips ``signs @ D``), in
bounded chunks; seeded with ``numpy.random.default_rng([seed, n, stream])``, so results are
deterministic.

Agreement between raters (:mod:`.agreement`, for grader calibration): Cohen's kappa
(unweighted and quadratic-weighted), Fleiss' kappa, accuracy, per-label precision and
recall, confusion matrix and leniency, with seeded percentile bootstrap intervals.
"""

from raglab.stats.gates import non_inferior, significantly_worse
from raglab.stats.multiplicity import adjust_pvalues
from raglab.stats.paired import PairedStat, paired_table

__all__ = ["PairedStat", "paired_table", "adjust_pvalues", "non_inferior",
           "significantly_worse"]
