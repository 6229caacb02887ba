"""MkDocs hook: the manual's generated tables, so they cannot drift from the code.

A page marks where a table goes with an HTML comment on a line of its own:

- ``<!-- raglab:config-choices -->``: every choice of every component group
  (``raglab.config.COMPONENT_GROUPS``, ``raglab.registry.entries(group)``) with its settings
  and their defaults, read from the choice's pydantic schema (``Entry.config.model_fields``);
- ``<!-- raglab:metrics SECTION -->``: the metrics of one section (``retrieval``,
  ``generation``, ``abstention``, ``operations``, ``conversation``) from
  ``raglab.metrics.catalog.METRICS``.
  Every metric falls in exactly one section (see :func:`section_of`).

The functions are importable so the tests can call them too:
``config_choices_table()``, ``metric_table(section)``, ``render(markdown)``.
"""

from __future__ import annotations

import re
from typing import Any

SECTIONS = ("retrieval", "generation", "abstention", "operations", "conversation")
_MARKER = re.compile(r"^<!-- raglab:(?P<what>config-choices|metrics)(?: (?P<arg>[\w-]+))? -->$",
                     re.M)
_ARROW = {"higher": "↑ higher", "lower": "↓ lower", "none": "–"}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _default(field: Any) -> str:
    """A setting's default as the config would write it, or *required*."""
    if field.is_required():
        return "*required*"
    if field.default_factory is not None:
        value = field.default_factory()
    else:
        value = field.default
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict):
        if not value:
            return "`{}`"
        return "`{" + ", ".join(f"{k}: {_plain(v)}" for k, v in value.items()) + "}`"
    return f"`{_plain(value)}`"


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    return str(value)


def config_choices_table() -> str:
    """Markdown: one row per (group, choice, setting), from the component registry."""
    from raglab import registry
    from raglab.config import COMPONENT_GROUPS

    rows = ["| group | choice | setting | default |", "|---|---|---|---|"]
    for group in COMPONENT_GROUPS:
        for _, entry in sorted(registry.entries(group).items()):
            fields = [(key, f) for key, f in entry.config.model_fields.items() if key != "name"]
            if not fields:
                rows.append(f"| `{group}` | `{entry.name}` | – | |")
                continue
            for key, f in fields:
                shown = f.alias or key
                rows.append(f"| `{group}` | `{entry.name}` | `{_cell(shown)}` | "
                            f"{_cell(_default(f))} |")
    return "\n".join(rows)


def section_of(spec: Any) -> str:
    """The section of the manual's metric tables a metric belongs to."""
    if spec.name.startswith(("candidate.", "final.")) or spec.family == "retrieval":
        return "retrieval"
    if spec.family is None:
        return "operations"
    if spec.family == "conversation":
        return "conversation"
    if spec.family == "abstention":
        return "abstention"
    return "generation"


def metric_table(section: str) -> str:
    """Markdown: the metrics of one section, in the catalog's order."""
    from raglab.metrics.catalog import METRICS

    if section not in SECTIONS:
        raise ValueError(f"unknown metric section {section!r} (one of: {', '.join(SECTIONS)})")
    rows = ["| metric | family | better | kind | headline | meaning |",
            "|---|---|---|---|---|---|"]
    for name, spec in METRICS.items():
        if section_of(spec) != section:
            continue
        shown = f"{name}@k" if spec.at_k else name
        rows.append(f"| `{_cell(shown)}` | {_cell(spec.family or '–')} | "
                    f"{_ARROW.get(spec.direction, spec.direction)} | {spec.kind} | "
                    f"{'★' if spec.headline else ''} | {_cell(spec.meaning)} |")
    return "\n".join(rows)


def render(markdown: str) -> str:
    """The page with every marker replaced by its table."""
    def table(m: re.Match[str]) -> str:
        if m.group("what") == "config-choices":
            return config_choices_table()
        return metric_table(m.group("arg") or "")
    return _MARKER.sub(table, markdown)


def on_page_markdown(markdown: str, page: Any = None, config: Any = None,
                     files: Any = None, **_: Any) -> str:
    return render(markdown)
