"""Running: one configuration (run), its components built from the config (components),
records, progress and the tracking backend (tracker)."""
