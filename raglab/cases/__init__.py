"""Growing the case set (``raglab cases``): failures and traffic as drafts, and adding
labelled cases to the set safely (:mod:`.drafts`, :mod:`.add`)."""
