"""Graders: pinned, versioned verdict producers behind one cached client."""
