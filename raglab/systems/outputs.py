"""Reading what a system returned, the same way for every adapter that does not build its
output itself (http, python, langchain, llamaindex): fields the system added are kept (on
a hit: in its ``metadata``; on the output: in ``extra``) with one warning per run naming
them, and a field the contract names with a wrong value fails that case with one line
naming the field and the case (never a pydantic dump, never the value: it may hold a
secret)."""

from __future__ import annotations

import sys
import threading
from typing import Any

from raglab.data.schema import ContractError, SystemOutput, accept_output


class OutputError(ValueError):
    """A system's output that does not fit the contract (that case fails)."""


def read_output(data: Any, case_id: str, what: str = "output",
                error: type[Exception] = OutputError,
                added: list[str] | None = None) -> SystemOutput:
    """``data`` (a SystemOutput or a dict of that shape) as a validated SystemOutput; the
    names of the fields the system added go to ``added``. ``what`` names the thing read in
    the error (``response`` for http); ``error`` is the exception raised."""
    from pydantic import ValidationError

    from raglab.data.io import first_problem

    if isinstance(data, SystemOutput):
        return data
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
