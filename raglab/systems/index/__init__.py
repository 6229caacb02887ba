"""Chunk indexes, one module per kind (``embedder`` config group): each kind owns its
config schema, how it builds its artifacts, how it loads them and how it scores a query.
:mod:`.store` holds what they share (chunking, the on-disk cache, filters and ACL)."""
