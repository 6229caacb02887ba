"""The one LLM client (every model call of graders and generators goes through it) and its
backends (:mod:`raglab.llm.backends`: the wire protocols, ``anthropic`` and ``openai``)."""
