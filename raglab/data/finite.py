"""JSON values raglab accepts: finite numbers and well-formed text only.

``NaN``, ``Infinity`` and ``-Infinity`` (which Python's json module reads by default) and
strings holding a lone UTF-16 surrogate (``"\\ud800"``, which cannot be written back as
UTF-8) are refused where data enters: dataset files, replayed outputs, a system's HTTP
response or Python return value. So no record ever holds NaN or Infinity.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
#: a JSON escape of a UTF-16 surrogate (in a pair or alone), in text and in bytes
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def may_escape_surrogate(raw: bytes) -> bool:
    """Whether a JSON text (UTF-8) may hold a ``\\uD800``-``\\uDFFF`` escape (a search
    for a backslash first: one byte is found many times faster than the pattern)."""
    return b"\\" in raw and _SURROGATE_ESCAPE_BYTES.search(raw) is not None


MAX_DEPTH = 100


class NotFiniteError(ValueError):
    """A value raglab refuses; ``str()`` says what and where (a dotted path)."""


def _refuse_constant(name: str) -> Any:
    raise NotFiniteError(f"non-finite number {name} (JSON allows finite numbers only)")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def loads(text: str | bytes, from_utf8: bool = False) -> Any:
    """``json.loads`` that refuses NaN/Infinity, lone surrogates and nesting deeper than
    MAX_DEPTH (NotFiniteError, or ValueError for malformed JSON). ``from_utf8``: the text
    was decoded from UTF-8 (strictly), so only a ``\\u`` escape can make a lone surrogate."""
    try:
        obj = _DECODER.decode(text) if isinstance(text, str) \
            else json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise NotFiniteError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except (json.JSONDecodeError, NotFiniteError):
        raise
    except ValueError as e:  # e.g. an integer of more than 4,300 digits
        raise NotFiniteError(f"a number JSON readers cannot hold: {e}") from None
    # NaN and Infinity were refused while parsing; a lone surrogate can only come from a
    # \u escape, and nesting deeper than MAX_DEPTH needs more than MAX_DEPTH brackets: a
    # text with neither needs no walk
    if isinstance(text, bytes):
        escaped = may_escape_surrogate(text)
        brackets = text.count(b"{") + text.count(b"[")
    else:
        escaped = bool(("\\" in text and _SURROGATE_ESCAPE.search(text))
                       or (not from_utf8 and _SURROGATE.search(text)))
        brackets = text.count("{") + text.count("[")
    if escaped or brackets > MAX_DEPTH:
        check(obj)
    return obj


def plain_finite(obj: Any) -> bool:
    """Whether ``obj`` is made of JSON values only (dicts with string keys, lists, tuples,
    strings, finite numbers, booleans, None), in one pass of the C JSON encoder. False when
    it holds anything else (a set, an object: then only its serialised form can tell);
    NotFiniteError, naming the field, for NaN, Infinity or a lone surrogate."""
    try:
        json.dumps(obj, allow_nan=False, ensure_ascii=False, check_circular=False).encode("utf-8")
        return True
    except (TypeError, RecursionError):
        return False
    except ValueError:
        check(obj)  # names the field
        raise NotFiniteError("a value JSON cannot hold (non-finite or not valid Unicode)") \
            from None


_CONTROL = re.compile("[\x00-\x1f\x7f]")


def _shown(path: str) -> str:
    """A field's dotted path on one line (control characters in keys escaped)."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], path) or "."


def check(obj: Any, path: str = "") -> None:
    """Raise NotFiniteError on a non-finite float, a lone surrogate or too deep nesting
    (sets and tuples are walked like lists)."""
    stack: list[tuple[Any, str, int]] = [(obj, path, 0)]
    while stack:
        node, where, level = stack.pop()
        if level > MAX_DEPTH:
            raise NotFiniteError(f"JSON nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, float):
            if not math.isfinite(node):
                raise NotFiniteError(f"field '{_shown(where)}': non-finite number {node!r} "
                                     "(finite numbers only)")
        elif isinstance(node, str):
            if _SURROGATE.search(node):
                raise NotFiniteError(f"field '{_shown(where)}': text holds a lone surrogate "
                                     "(not valid Unicode)")
        elif isinstance(node, dict):
            for k, v in node.items():
                if isinstance(k, str) and _SURROGATE.search(k):
                    raise NotFiniteError(f"field '{_shown(where)}': key holds a lone "
                                         "surrogate (not valid Unicode)")
                stack.append((v, f"{where}.{k}" if where else str(k), level + 1))
        elif isinstance(node, (list, tuple, set, frozenset)):
            for i, v in enumerate(node):
                stack.append((v, f"{where}.{i}" if where else str(i), level + 1))
