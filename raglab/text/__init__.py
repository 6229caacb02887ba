"""Low-level text helpers shared by systems, graders, metrics and the runner."""
