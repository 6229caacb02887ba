"""The score bound of a graded share (``score-bound``): Tango's score interval and test on
the gain and loss mass of per-case differences in ``[-1, 1]``, in units of a scale ``s``.

Tango's statistic treats each changed case as a jump of size 1, so its variance under
``H0: delta = d0`` is that of a trinomial with the changes as counts. A graded difference
``d`` in ``[-1, 1]`` has ``E d^2 <= E |d|``: with its gain and loss *mass* as counts, the
interval is conservative (Tango's own for a share that moves by whole steps), but it does
not shrink when every change is small. Measured in units of ``s``, with ``|d| / s`` as the
counts, the variance becomes ``s E |d|``, valid whenever ``E d^2 <= s E |d|``. The scale
is the observed ratio of the second moment to the mass, shrunk towards the worst case 1 by
one pseudo-change of size 1 and of the mean weight ``w_bar = sum w / n``:

    s = (sum w d^2 + w_bar) / (sum w |d| + w_bar)

so ``s = 1`` (today's interval) when nothing changed or every change is a whole step, and
``s`` reaches the observed ratio only once the observed mass is large beside one full
change: a few changes cannot rule out an unseen large one, many small ones make it
unlikely. Without the pseudo-change the interval under-covers where most changes are small
and a few are large (77% in our simulations); with it, it kept at least 95.6% in every
regime simulated (docs/statistics.md) while the width with 30 changes of +-0.01..0.05 in
150 cases fell from 0.055 to 0.032. The interval is ``s`` times Tango's interval of
``(gain / s, loss / s, n)``, and the one-sided test the score test at ``d0 / s`` (clipped to
``[-1, 1]``, where Tango's statistic is infinite), so the test rejects at ``alpha / 2``
exactly where the interval excludes ``d0``.
"""

from __future__ import annotations

import numpy as np


def bound_moments(U: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(sum w d^2, sum w |d|, w_bar)`` of each column of units (``U`` their weighted sums
    of differences, ``W`` their weights; the difference of a unit is ``U / W``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.where(W > 0, U / np.where(W > 0, W, 1.0), 0.0)
    a = np.abs(d)
    return (W * a * a).sum(axis=0), (W * a).sum(axis=0), W.sum(axis=0) / max(U.shape[0], 1)


def scale_of(m2, m1, pseudo):
    """The scale ``s = (m2 + w_bar) / (m1 + w_bar)``, at most 1, of the moments of
    :func:`bound_moments` (of ``N`` cases like these: ``f m2`` and ``f m1`` with ``f = N /
    n``, as raglab.stats.settle projects it)."""
    m2, m1, pseudo = (np.asarray(x, dtype=np.float64) for x in (m2, m1, pseudo))
    den = m1 + pseudo
    with np.errstate(invalid="ignore", divide="ignore"):  # no weight at all: the scale 1
        return np.where(den > 0, np.minimum((m2 + pseudo) / np.where(den > 0, den, 1.0), 1.0),
                        1.0)


def bound_scale(U: np.ndarray, W: np.ndarray) -> np.ndarray:
    """The scale ``s`` in ``(0, 1]`` of each column of units."""
    return scale_of(*bound_moments(U, W))
