"""Reading what a system returned, the same way for every adapter that does not build its
output itself (http, python, langchain, llamaindex): fields the system added are kept (on
a hit: in its ``metadata``; on the output: in ``extra``) with one warning per run naming
them, and a field the contract names with a wrong value fails that case with one line
naming the field and the case (never a pydantic dump, never the value: it may hold a
secret). How large an answer may be is one bound, ``system.max_body_bytes``: the http
system counts its response body, the python system its return value
(:func:`json_size_over`)."""

from __future__ import annotations

import json
import re
import sys
import threading
from typing import Any

from pydantic import BaseModel

from raglab.data.schema import ContractError, SystemOutput, accept_output

#: the largest answer a system may give, in bytes of JSON (``system.max_body_bytes``: the
#: http system's response body, the python system's return value)
MAX_BODY_BYTES = 64 * 1024 * 1024
#: containers deeper than this are not measured: JSON cannot be written that deep (nor
#: an object that holds itself), so the record fails that case anyway
_MAX_DEPTH = 300
#: characters of a string encoded at a time (to count its bytes as JSON writes it)
_PIECE = 1 << 20
#: what JSON writes escaped: a control character (``\\u0001``: six bytes), a quote, a backslash
_ESCAPED = re.compile(r'[\x00-\x1f"\\]')


class OutputError(ValueError):
    """A system's output that does not fit the contract (that case fails)."""


def json_size_over(data: Any, limit: int) -> bool:
    """Whether ``data`` (a SystemOutput, or the dicts, lists and strings a system returned)
    is larger than ``limit`` bytes as JSON, counted without writing it whole: each string's
    bytes as JSON writes it (UTF-8, a control character escaped in six bytes, a quote or a
    backslash in two) and its quotes, keys as strings, two bytes for a container's brackets and
    one or two for each item's separators, eight for any other value (a number, null).
    An object referred to twice counts twice, as JSON writes it twice, but is walked once;
    the count stops as soon as it passes ``limit``; only the pieces of one non-ASCII
    string are copied at a time."""
    return _size(data, limit, {}, set(), 0) > limit


def _size(value: Any, room: int, seen: dict[int, int], path: set[int], depth: int) -> int:
    """The JSON size of ``value``, or a number above ``room`` once it is known to be over
    (``seen``: the sizes of the containers walked, by id; ``path``: those being walked)."""
    if isinstance(value, str):
        return _json_size(value, room) + 2
    if isinstance(value, bytes | bytearray):
        return len(value) + 2
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, BaseModel):
        items = vars(value).items()
    elif isinstance(value, list | tuple):
        items = None
    else:
        return 8
    key = id(value)
    if key in seen:
        return seen[key]
    if key in path or depth >= _MAX_DEPTH:
        return 0
    path.add(key)
    total = 2
    if items is None:
        for v in value:
            total += 1 + _size(v, room - total, seen, path, depth + 1)
            if total > room:
                break
    else:
        for k, v in items:
            total += 2 + _size(k, room - total, seen, path, depth + 1)
            total += _size(v, room - total, seen, path, depth + 1)
            if total > room:
                break
    path.discard(key)
    seen[key] = total
    return total


def _json_size(text: str, room: int) -> int:
    """The size of ``text`` inside a JSON string (UTF-8, escapes written out, without its
    quotes), or a number above ``room`` once it is known to be."""
    n = len(text)
    if n > room or (text.isascii() and _ESCAPED.search(text) is None):
        return n  # (never fewer bytes than characters)
    return sum(len(json.dumps(text[i:i + _PIECE], ensure_ascii=False)
                   .encode("utf-8", "surrogatepass")) - 2 for i in range(0, n, _PIECE))


def read_output(data: Any, case_id: str, what: str = "output",
                error: type[Exception] = OutputError,
                added: list[str] | None = None) -> SystemOutput:
    """``data`` (a SystemOutput or a dict of that shape) as a validated SystemOutput; the
    names of the fields the system added go to ``added``. ``what`` names the thing read in
    the error (``response`` for http); ``error`` is the exception raised."""
    from pydantic import ValidationError

    from raglab.data.io import first_problem

    if isinstance(data, SystemOutput):  # validated again: it may have been changed since
        data = data.model_dump()  # (a hit appended, a span reversed) as the schema saw it
    if not isinstance(data, dict):
        raise error(f"{what} of case {case_id!r} is a {type(data).__name__}, not a JSON "
                    "object or a SystemOutput")
    data = dict(data)
    data.setdefault("case_id", case_id)
    if data["case_id"] != case_id:
        raise error(f"{what} is for case {data['case_id']!r}, not {case_id!r}")
    try:
        out, names = accept_output(data)
    except ContractError as e:
        raise error(f"{what} of case {case_id!r}: {e}") from None
    except ValidationError as e:  # named without the value (it may hold a secret)
        p = first_problem(e, SystemOutput)
        more = e.error_count() - 1
        raise error(
            f"{what} of case {case_id!r} does not fit the output contract: "
            f"{'field ' + repr(p.loc) + ': ' if p.loc else ''}{p.msg}"
            f"{f' (and {more} more problem(s))' if more else ''}") from None
    if added is not None:
        added.extend(names)
    return out


class AddedFieldsWarning:
    """One line per run naming the fields the system added (kept, not refused)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._warned = False

    def __call__(self, added: list[str]) -> None:
        if not added:
            return
        with self._lock:
            if self._warned:
                return
            self._warned = True
        print(f"raglab: warning: the system's answers carry fields the output contract does "
              f"not name, kept in the record (on hits: in 'metadata'; on the output: in "
              f"'extra'): {', '.join(sorted(set(added)))}", file=sys.stderr, flush=True)
