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
- Interval (``interval="auto"``, the default), by metric kind (``paired._method``; the
  Statistics page of the manual has the simulations): pass/fail metrics get Tango's score
  interval corrected for skewness and discreteness (``score.paired_interval``: the variance
  under the hypothesised difference, so an unchanged metric gets about ``+-z^2 / (n +
  z^2)``, not ``[0, 0]``); shares that interval on their gain and loss mass in units of a
  scale that shrinks with the size of the changes (``score-bound``, :mod:`.bound`), however
  many changed; unbounded graded metrics with 50 or more changed units the bootstrap-t
  (``studentized``); unbounded graded metrics with fewer, and clustered comparisons, the
  inversion of the sign-flip test below with the same sign vectors as its p-value (limits
  are order statistics of subset means, ``resample.signflip_interval``).
  ``signflip``,
  ``bca`` and ``percentile`` apply one method to every column. When every difference is
  equal (outside the score methods) the interval is ``[delta, delta]`` (``degenerate``);
  when the sign-flip test cannot reach the level (n <= 5 units) it is ``unbounded`` (None),
  equal differences or not;
  ``n == 0`` gives no interval and no p-value (``none``).
- Weights and clusters: with ``weights`` every mean and statistic is weighted (the
  difference is ``sum w d / sum w``, sign flips and resamples carry the weights; ``n_eff``
  is Kish's effective sample size); with ``clusters`` the cases of one cluster are flipped
  and resampled together (units are clusters). Weighted binary columns get the score test
  on effective counts; clustered ones the cluster sign-flip test.
- Power: ``mde``, the minimum detectable effect of the two-sided test at ``1 -
  confidence`` with 80% power: for pass/fail metrics from the exact power of their score
  test planned at the discordance ``max(observed, delta)`` (``score.score_mde``; shares in
  the score regime: its normal approximation, ``score.normal_mde``), else ``(z_{1-alpha/2}
  + z_0.8) * se`` from the observed variance.
- One-sided tests (``one_sided``): the test of ``delta < t`` or ``delta > t`` whose inversion
  is the column's interval (the corrected score test, the bootstrap-t or the sign-flip
  test): the test behind the ``not_worse`` gate.
- Test, two-sided: ``binary`` metrics (per-case pass/fail) with the score interval use
  the test it inverts at 0 (``score``): McNemar's score statistic ``(g - l) / sqrt(g +
  l)`` against the normal (1 when no pair is discordant), so p < 1 - confidence exactly
  when the interval excludes 0. Other kinds use a paired sign-flip permutation test of the
  mean difference, which assumes only that under the null each case's difference is
  symmetric about zero: exact enumeration of the ``2**n`` sign vectors when ``2**n <= n_resamples``
  (``permutation-exact``), else ``n_resamples`` random sign vectors with the
  ``(b + 1) / (m + 1)`` correction (``permutation``), which keeps the p-value valid.
  Where fewer than 10 random sign vectors reach the observed sum (p below the Monte Carlo
  resolution, which a Holm family of hundreds of rows needs), the tail of the same
  permutation distribution is computed: enumerated up to n = 20, else by its saddlepoint
  approximation (``resample.saddlepoint_tail``). p-values are never 0: an underflow reads
  as the smallest positive double. The random sign vectors are a fixed plan that depends on
  ``n`` only, never on ``seed``, applied to each column's units in a canonical order
  (sorted by difference, then weight): the same multiset of paired units gives the same
  p-value, whatever the seed and the order of the cases. The bootstrap-t (interval and
  one-sided test) follows a fixed plan of its own in the same order.
- Multiplicity (``adjust_pvalues``): Holm's step-down adjustment (family-wise error control
  under any dependence) or Benjamini-Hochberg (false discovery rate); which family each
  test belongs to is the caller's (raglab.compare: the headline metrics overall are
  confirmatory, the rest exploratory).
- Gates: ``non_inferior`` (the interval's bound beyond ``-margin``: a one-sided 2.5% test
  with the 95% interval) and ``significantly_worse`` (the difference on the bad side with
  a p-value, adjusted when given, under ``alpha``).

Speed: columns with the same number of units ``n`` share one resample stream and are
resampled together as matrix products (bootstrap replicates are ``counts @ D``, sign flips
``bits @ U`` and ``bits @ W``), in bounded chunks; the ``bca`` / ``percentile`` bootstrap
resamples are seeded with ``numpy.random.default_rng([seed, n, 0])``, the rest follow the
fixed plans, so results are deterministic.

Every pair of a sweep's jobs (:mod:`.family`, for ``raglab compare SWEEP``): the randomised
Tukey HSD, permuting the job labels within each shared case, with family-wise adjusted
p-values per metric and the best group (every job not separable from the best).

Agreement between raters (:mod:`.agreement`, for grader calibration): Cohen's kappa
(unweighted and quadratic-weighted), Fleiss' kappa, accuracy, per-label precision and
recall, confusion matrix and leniency, with seeded percentile bootstrap intervals.
"""

from raglab.stats.gates import non_inferior, significantly_worse
from raglab.stats.multiplicity import adjust_pvalues
from raglab.stats.paired import PairedStat, one_sided, paired_table

__all__ = ["PairedStat", "paired_table", "one_sided", "adjust_pvalues", "non_inferior",
           "significantly_worse"]
