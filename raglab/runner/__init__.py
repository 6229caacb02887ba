"""Running: one configuration (run), stage reuse (stage cache), records."""
