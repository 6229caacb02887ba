"""Sequential decisions: an anytime-valid confidence sequence on the paired differences of
a gated metric (:mod:`.cs`) and the rule that settles a gate check on it (:mod:`.settle`).
"""
