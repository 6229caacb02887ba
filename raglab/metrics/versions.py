"""Metric families and raglab's own metric code versions (bumped when a definition changes)."""

FAMILIES = ("retrieval", "faithfulness", "citations", "correctness", "relevance", "nuggets",
            "abstention")

# Bump a family's number whenever its metric code changes what it reports.
CODE_VERSIONS = {
    "retrieval": 2,  # 2: evidence found on the union of a document's hits; context precision
                     # a share (average precision apart); null for unanswerable cases
    "faithfulness": 2,  # 2: claim verdicts name the supporting passage
                        # (final.context_precision_graded)
    "citations": 1,
    "correctness": 2,  # 2: reference claims checked against the answer
    "relevance": 1,
    "nuggets": 1,
    "abstention": 1,
}
