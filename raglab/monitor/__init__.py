"""Online monitoring of production traffic (``raglab monitor``): no labels needed.

- :mod:`.traffic`: traffic lines (a SystemOutput plus question and timestamp), read from a
  JSON Lines file or a run directory, bad lines counted; sampling and windows.
- :mod:`.windows`: per-window figures and the alerts (pure).
"""
