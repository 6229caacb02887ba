"""Reports: the per-run report, comparisons, gates and decision records.

Modules here import matplotlib lazily (inside functions), so importing the package is cheap.
"""
