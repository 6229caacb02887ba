"""Metric families and raglab's own metric code versions (bumped when a definition changes).

The families come from the metric declarations (raglab.metrics.catalog), in the order of
``metric_versions``; ``diagnosis`` follows them. ``conversation`` (raglab.metrics.conversation)
is not in ``metric_versions``: its version is in metrics.json's ``conversations`` section
(:func:`conversation_version`), which only runs with conversations have.
"""

from collections.abc import Mapping

from raglab.metrics.catalog import FAMILIES, GRADED_FAMILIES

__all__ = ["CODE_VERSIONS", "FAMILIES", "GRADED_FAMILIES", "conversation_version"]

# Bump a family's number whenever its metric code changes what it reports.
CODE_VERSIONS = {
    "retrieval": 2,  # 2: evidence found on the union of a document's hits; context precision
                     # a share (average precision apart); null for unanswerable cases
    "faithfulness": 3,  # 2: claim verdicts name the supporting passage
                        # (final.context_precision_graded); 3: partial refusals keep their
                        # facts; headings apart; entity check token by token
    "citations": 2,  # 2: markers attach to the sentence they follow; coverage not clamped
    "correctness": 3,  # 2: reference claims checked against the answer; 3: a refusal is 0
    "relevance": 2,  # 2: a refusal is 0, null when unanswerable; slot/key-term/off-question rubric
    "nuggets": 2,  # 2: polarity and numbers of the aligned sentence; PARTIAL for implied
    "abstention": 2,  # 2: an abstention asserts nothing; must_not_contain kinds and rates
    "diagnosis": 3,  # failure attribution (raglab.metrics.diagnosis); 2: incomplete_answer;
                     # 3: a wrong answer missing any nugget (vital or not) is incomplete
    "conversation": 2,  # conversation-level metrics (raglab.metrics.conversation); 2: a
                        # conversation with a quarantined turn before its first failing
                        # one is left out of all_turns_correct and first_failing_turn
}
assert tuple(CODE_VERSIONS) == (*FAMILIES, "diagnosis", "conversation"), \
    "a family without a code version"


def conversation_version(metric_versions: Mapping[str, str]) -> str:
    """The ``conversation`` family's version: its code version and the versions of what it
    reads (a turn passes by its diagnosis; retention reads nugget verdicts; follow-up
    resolution the retrieval metrics)."""
    from raglab.cache import content_key

    return content_key("conversation", CODE_VERSIONS["conversation"],
                       *(metric_versions.get(f) for f in ("diagnosis", "nuggets", "retrieval")),
                       length=12)
