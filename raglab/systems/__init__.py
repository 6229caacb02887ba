"""Systems under test: the adapter protocol, the reference pipeline and the adapters."""
