"""Grader calibration: agreement of a grader version with human labels (``raglab calibrate``).

- :mod:`.labels`: reading and checking a labels file (one line per judged item).
- :mod:`.judge`: asking the configured grader about every label, through the run's cached
  grading path (so calibration and runs share judgments and versions).
- :mod:`.summary`: the figures (kappa, intervals, confusion, leniency, self-consistency)
  and their text renderings.
- :mod:`.store`: calibration records keyed by metric-family version, and
  :func:`lookup`, which ``raglab run`` and ``raglab compare`` call to show each family
  version's kappa or "uncalibrated".
"""

from __future__ import annotations

from raglab.calibration.store import lookup

__all__ = ["lookup"]
