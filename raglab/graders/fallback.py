"""What a model judge does when a batched answer is unusable (every backend alike).

A judgment of several items (the claims of an answer, its nuggets, the cited sentences of a
context) is asked for in one structured call. The LLM client reads the answer (the JSON,
or the first JSON object in prose around it, only when it validates fully) and re-asks
once when it is unusable (:data:`ASK_RETRIES`). When that answer is unusable too, each
item is asked for alone, with the same prompt; an item whose answer is still unusable makes
the whole judgment an error (so the case's metric is an error): a verdict is never guessed.
The client counts each step (``format_re_asks``, ``single_item_calls``,
``unreadable_items`` in ``model_usage``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from raglab.llm.client import LLMFormatError

#: re-asks of an unusable answer before its items are asked for one at a time
ASK_RETRIES = 1


def note(llm: Any, what: str, n: int = 1) -> None:
    """Count a fallback on the client (nothing without one)."""
    fn = getattr(llm, "note_fallback", None)
    if fn is not None and n:
        fn(what, n)


async def one_by_one(llm: Any, whole: Callable[[], Awaitable[Any]], n: int,
                     item: Callable[[int], Awaitable[Any]] | None,
                     join: Callable[[list[Any]], Any] = list) -> Any:
    """``await whole()``; when its answers were unusable and it has ``n`` > 1 items, the
    items' results ``join([await item(i) for i in range(n)])`` instead (asked together),
    in the shape of ``whole()``'s; or an :class:`LLMFormatError` naming how many items
    stayed unreadable."""
    try:
        return await whole()
    except LLMFormatError as e:
        if n <= 1 or item is None:
            note(llm, "unreadable_items", max(n, 1))
            raise
        batch_error = e
    note(llm, "single_item_calls", n)
    results = await asyncio.gather(*(item(i) for i in range(n)), return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    for r in failed:
        if not isinstance(r, LLMFormatError):
            raise r  # a transport failure, a cancellation: as it is
    if failed:
        note(llm, "unreadable_items", len(failed))
        raise LLMFormatError(f"{len(failed)} of {n} items unreadable, asked alone after "
                             f"their batch ({failed[0]})") from batch_error
    return join(results)


__all__ = ["ASK_RETRIES", "LLMFormatError", "note", "one_by_one"]
