"""The one LLM client (every model call of graders and generators goes through it)."""
