"""raglab: declarative, config-driven evaluation of retrieval-augmented generation systems.

Importing raglab has no side effects: no network, no telemetry, no seeding, no heavy imports.
"""

__version__ = "0.1.0"
