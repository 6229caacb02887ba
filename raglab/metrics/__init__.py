"""Metrics: pure functions of records (no I/O, no model calls, no randomness)."""
