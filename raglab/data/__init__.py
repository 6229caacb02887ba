"""Data contract: schemas (nouns), JSON Lines I/O and dataset validation."""
