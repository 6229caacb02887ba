"""What a model judge sends and reads back, apart from any backend: prompt rendering, the
JSON schemas of its structured outputs and the parsers that check them."""

from __future__ import annotations

import re
from typing import Any

from raglab.data.verdicts import CLAIM_LABELS, NUGGET_LABELS, RELEVANCE_LABELS
from raglab.text.normalize import contains_normalized, normalize

PROMPT_NAMES = ("decompose", "verify", "nuggets", "relevance")
USER_SPLIT = re.compile(r"^=== USER ===[ \t]*\n", re.M)
PLACEHOLDER = re.compile(r"\{(question|answer|claims|passages|nuggets|max_claims|cited|items)\}")


def _obj(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def _items(index_field: str, labels: tuple[str, ...]) -> dict[str, Any]:
    # evidence and reasoning come before the verdict, so the model decides after citing
    return {"type": "array", "items": _obj({
        index_field: {"type": "integer"},
        "evidence": {"type": "string"},
        "reasoning": {"type": "string"},
        "label": {"type": "string", "enum": list(labels)},
    })}


DECOMPOSE_SCHEMA = _obj({"claims": {"type": "array", "items": {"type": "string"}}})
VERIFY_SCHEMA = _obj({"verdicts": _items("claim_index", CLAIM_LABELS)})
NUGGETS_SCHEMA = _obj({"judgments": _items("nugget_index", NUGGET_LABELS)})
RELEVANCE_SCHEMA = _obj({"reasoning": {"type": "string"},
                         "label": {"type": "string", "enum": list(RELEVANCE_LABELS)}})


def render(template: str, values: dict[str, str]) -> tuple[str, str]:
    """``(system, user)`` of a template, placeholders substituted in one pass."""
    def sub(text: str) -> str:
        return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)

    parts = USER_SPLIT.split(template, maxsplit=1)
    if len(parts) == 1:
        return "", sub(template).strip()
    return sub(parts[0]).strip(), sub(parts[1]).strip()


def _numbered(tag: str, items: list[str]) -> str:
    return "\n".join(f'<{tag} index="{i}">{" ".join(t.split())}</{tag}>'
                     for i, t in enumerate(items, 1))


def _passages(passages: list[str]) -> str:
    return "\n".join(f'<passage index="{i}">\n{p.strip()}\n</passage>'
                     for i, p in enumerate(passages, 1))


def parse_claims(parsed: dict, max_claims: int) -> list[str]:
    claims = parsed["claims"]
    if not isinstance(claims, list) or not all(isinstance(c, str) for c in claims):
        raise ValueError("claims must be a list of strings")
    out = [" ".join(c.split()) for c in claims]
    return [c for c in out if c][:max_claims]


def parse_items(parsed: dict, field: str, index_field: str, n: int,
                labels: tuple[str, ...]) -> list[list[str | None]]:
    """``[[label, evidence or None], ...]`` in index order; ValueError unless exactly one
    item per index 1..n with an allowed label (a lone item may leave its index out: it can
    only be item 1)."""
    items = parsed[field]
    if not isinstance(items, list) or len(items) != n:
        raise ValueError(f"expected {n} {field}, got "
                         f"{len(items) if isinstance(items, list) else type(items).__name__}")
    by_index: dict[int, list[str | None]] = {}
    for it in items:
        if not isinstance(it, dict):
            raise ValueError(f"each of {field} must be an object")
        idx = it[index_field] if n != 1 or index_field in it else 1
        label, ev = it["label"], it.get("evidence")
        if isinstance(idx, bool) or not isinstance(idx, int) or not 1 <= idx <= n \
                or idx in by_index:
            raise ValueError(f"bad or repeated {index_field}: {idx!r}")
        if label not in labels:
            raise ValueError(f"label {label!r} is not one of {', '.join(labels)}")
        if ev is not None and not isinstance(ev, str):
            raise ValueError("evidence must be a string")
        by_index[idx] = [label, (" ".join(ev.split()) if ev else "") or None]
    return [by_index[i] for i in range(1, n + 1)]


def passage_of(quote: str | None, passages: list[str], threshold: float = 90.0) -> int | None:
    """The index of the passage an evidence quote was taken from: the first holding it after
    normalisation, else the best fuzzy alignment at ``threshold`` or above; None if none."""
    q = normalize(quote or "")
    if not q:
        return None
    norm = [normalize(p) for p in passages]
    for i, p in enumerate(norm):
        if contains_normalized(p, q):
            return i
    from rapidfuzz import fuzz

    best = max(((fuzz.partial_ratio(q, p), -i) for i, p in enumerate(norm) if p), default=None)
    return -best[1] if best is not None and best[0] >= threshold else None


def parse_relevance(parsed: dict) -> list[str]:
    label, why = parsed["label"], parsed["reasoning"]
    if label not in RELEVANCE_LABELS:
        raise ValueError(f"label {label!r} is not one of {', '.join(RELEVANCE_LABELS)}")
    if not isinstance(why, str):
        raise ValueError("reasoning must be a string")
    return [label, " ".join(why.split())]
