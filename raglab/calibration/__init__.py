"""Grader calibration: agreement of a grader version with human labels (``raglab calibrate``).

- :mod:`.labels`: reading and checking a labels file (one line per judged item).
- :mod:`.judge`: asking the configured grader about every label, through the run's cached
  grading path (so calibration and runs share judgments and versions).
- :mod:`.summary`: the figures (kappa, intervals, confusion, leniency, self-consistency)
  and their text renderings.
- :mod:`.records`: calibration records keyed by metric-family version, and ``lookup``,
  which ``raglab run``, ``raglab compare`` and ``raglab decide`` call to show each family
  version's kappa or "uncalibrated".
"""
