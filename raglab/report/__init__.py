"""A run's report: the per-run Markdown and HTML report, its plots, the headline and config
summaries (comparisons, sweeps and decisions live in :mod:`raglab.compare`).

Modules here import matplotlib lazily (inside functions), so importing the package is cheap.
"""
