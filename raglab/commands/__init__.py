"""Subcommands of the raglab CLI (imported only when used)."""
