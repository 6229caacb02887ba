"""Comparisons of runs: a candidate against a baseline (paired, per slice), a whole sweep
against one of its jobs, gate sets and the decision records ``raglab decide`` writes.

They read runs (from run directories or from MLflow) and sit above the run, its report and
tracking.
"""
