"""Graders: pinned, versioned verdict producers (heuristic, claude, openai, none) and the
orchestration that turns their judgments into cached verdicts. Model calls go through the
one client in raglab.llm."""
