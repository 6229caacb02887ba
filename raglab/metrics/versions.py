"""Metric families and raglab's own metric code versions (bumped when a definition changes)."""

FAMILIES = ("retrieval", "faithfulness", "citations", "correctness", "relevance", "nuggets",
            "abstention")

# Bump a family's number whenever its metric code changes what it reports.
CODE_VERSIONS = {
    "retrieval": 1,
    "faithfulness": 1,
    "citations": 1,
    "correctness": 2,  # 2: reference claims checked against the answer
    "relevance": 1,
    "nuggets": 1,
    "abstention": 1,
    "diagnosis": 1,  # failure attribution (raglab.metrics.diagnosis)
}
