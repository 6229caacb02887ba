"""The one LLM client of raglab: every model call (grader and generator) goes through it.

The client owns what every backend shares; the wire call is its backend's
(:mod:`raglab.llm.backends`: ``anthropic``, ``openai``), named by the request:

- One backend per (backend, endpoint) and client, made lazily on the running event loop.
  Keys come from the environment as each SDK reads them; raglab never stores, prints or
  logs one, and an endpoint (a base URL) is never part of a cache key.
- Transport retries (429 with ``retry-after``, 5xx, connection errors, timeouts) are the
  SDK's, with backoff and jitter, ``max_retries`` and ``timeout`` from the config. A body
  that cannot be parsed, or a structured output that does not parse or validate, is tried
  up to ``FORMAT_RETRIES`` more times here (a caller may ask for fewer: a grader re-asks
  once, then asks for the items one at a time, :mod:`raglab.graders.fallback`); then
  :class:`LLMFormatError` (one line). A structured output is the whole text when it is JSON,
  else the first balanced JSON object or array in it (a model's prose around it), taken
  only when it validates fully.
- At most ``concurrency`` requests are in flight at once; identical requests in flight at
  the same time share one call.
- Responses are cached in the stage cache (namespace ``llm``) by the full request content;
  a hit makes no call and returns ``cached=True`` with the usage and cost first recorded.
- ``mode="batch"``: grading requests go to the backend's batch API where it has one
  (Anthropic's Message Batches, OpenAI's Batch API: sent once no new request arrived for a
  moment; batch prices are half the online ones), else online, at the online price (also
  when the server turns out to have none). Generation requests always go online.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from raglab.cache import content_key
from raglab.errors import ConfigError
from raglab.llm.backends import Backend, BatchUnavailable, CallFailed, backend_class
from raglab.llm.cost import current_meter

FORMAT_RETRIES = 2
#: the fallbacks of structured output, counted per run (``model_usage``): re-asks of an
#: unusable answer, items asked alone after their batch's answers were unusable, items
#: still unreadable alone, and (server, model) pairs found without ``json_schema`` support
FALLBACK_FIELDS = ("format_re_asks", "single_item_calls", "unreadable_items",
                   "schema_unsupported")
USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                "cache_read_input_tokens")
PRICE_OF = {"input_tokens": "input", "output_tokens": "output",
            "cache_creation_input_tokens": "cache_write", "cache_read_input_tokens": "cache_read"}


class LLMCallError(Exception):
    """A model call that still failed after its retries (one line, no secrets)."""


class LLMFormatError(LLMCallError):
    """A model call whose answers were all unusable structured output (the server answered;
    what it said did not parse or validate)."""


@dataclass(frozen=True)
class LLMRequest:
    model: str
    system: str
    user: str
    max_tokens: int
    purpose: str = "grade"
    schema: dict | None = None
    cache_system: bool = False
    #: independent repeat of the same request (grader.repeats): part of the cache key only,
    #: never sent, so repeat r is never answered by another repeat's cached response
    repeat: int = 0
    #: the wire protocol (raglab.llm.backends): part of the cache key
    backend: str = "anthropic"
    #: the backend's request options, ``((name, value), ...)``: sent, so part of the key
    options: tuple[tuple[str, Any], ...] = ()
    #: where the backend sends it, ``((name, value), ...)`` (a base URL; never a key):
    #: not part of the cache key, as the model names what answers
    endpoint: tuple[tuple[str, Any], ...] = ()

    def cache_key(self) -> str:
        extra: tuple = ("repeat", self.repeat) if self.repeat else ()
        if self.options:
            extra = ("options", [list(o) for o in self.options], *extra)
        return content_key(self.backend, self.model, self.max_tokens,
                           self.system, self.user, self.schema, *extra)


@dataclass
class LLMResponse:
    text: str
    parsed: dict | None
    usage: dict
    cost_usd: float | None
    latency_ms: float
    cached: bool = False

    def usage_dict(self) -> dict[str, float]:
        """Token counts plus ``cost_usd`` (left out when no price is known)."""
        out = {k: v for k, v in self.usage.items() if isinstance(v, (int, float))}
        if self.cost_usd is not None:
            out["cost_usd"] = self.cost_usd
        return out


def call_info(req: LLMRequest, resp: LLMResponse) -> dict[str, Any]:
    """What a case's record keeps of one grading call (``grading_calls``): the model, its
    backend, the request's purpose, the tokens, the cost in USD (None: not priced), the
    latency in ms (of the call that made a cached response) and whether raglab's cache
    answered it; the repeat when it is not the first."""
    out: dict[str, Any] = {"model": req.model, "backend": req.backend, "purpose": req.purpose,
                           **{f: int(resp.usage.get(f, 0) or 0) for f in USAGE_FIELDS
                              if resp.usage.get(f) or f in USAGE_FIELDS[:2]},
                           "cost_usd": resp.cost_usd, "latency_ms": resp.latency_ms,
                           "cached": bool(resp.cached)}
    if req.repeat:
        out["repeat"] = req.repeat
    return out


def _one_line(e: BaseException) -> str:
    from raglab.secrets import clip

    return clip(" ".join(str(e).split()), 300) or type(e).__name__  # scrubbed, then cut


def json_in(text: str) -> Any:
    """The JSON value of a text: the whole text when it is JSON, else the first balanced
    JSON object or array in it (prose or a code fence around it); ValueError when there is
    none. The caller validates it fully before using it."""
    try:
        return json.loads(text)
    except ValueError as e:
        first = e
    decoder = json.JSONDecoder()
    i = min((j for j in (text.find("{"), text.find("[")) if j != -1), default=-1)
    if i == -1:
        raise ValueError("no JSON in the answer" if text.strip() else "an empty answer")
    while i != -1:
        try:
            return decoder.raw_decode(text, i)[0]
        except ValueError:
            nxt = [j for j in (text.find("{", i + 1), text.find("[", i + 1)) if j != -1]
            i = min(nxt, default=-1)
    raise first


def cost_usd(usage: dict, prices: dict[str, float] | None, batch: bool) -> float | None:
    """USD of one call from ``prices`` (USD per million tokens); None when not priced."""
    if not prices:
        return None
    from raglab.llm.prices import complete

    prices = complete(prices)
    total = 0.0
    for fld, name in PRICE_OF.items():
        n = usage.get(fld) or 0
        if n:
            if name not in prices:
                return None
            total += n * prices[name]
    return total / 1e6 * (0.5 if batch else 1.0)


class LLMClient:
    def __init__(self, *, timeout_s: float, max_retries: int, concurrency: int,
                 mode: str = "online", batch_poll_s: float = 30.0,
                 prices: dict[str, dict[str, float]] | None = None, cache: Any = None):
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.concurrency = concurrency
        self.mode = mode
        self.batch_poll_s = batch_poll_s
        self.prices = dict(prices or {})  # {model: {input, output, cache_write, cache_read}}
        self.cache = cache
        self.total_cost_usd = 0.0
        self.calls = 0
        self.cache_hits = 0
        self.usage_totals = dict.fromkeys(USAGE_FIELDS, 0)
        self.fallbacks = dict.fromkeys(FALLBACK_FIELDS, 0)  # (schema_unsupported: backends')
        self.priced = True  # False once a call had no known price
        self.unpriced_calls = 0
        self.closed = False
        self._backends: dict[tuple, Backend] = {}
        self._sem: asyncio.Semaphore | None = None
        self._inflight: dict[str, asyncio.Future] = {}
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    @property
    def batches(self) -> int:
        """Batch jobs sent so far."""
        return sum(b.batch_jobs for b in self._backends.values())

    def note_fallback(self, what: str, n: int = 1) -> None:
        """Count a structured-output fallback (one of :data:`FALLBACK_FIELDS`)."""
        self.fallbacks[what] += n

    def _fallbacks(self) -> dict[str, int]:
        return {**self.fallbacks, "schema_unsupported": sum(
            getattr(b, "schema_unsupported", 0) for b in self._backends.values())}

    # -- backends ------------------------------------------------------------------------
    def slots(self) -> asyncio.Semaphore:
        """The semaphore of request slots (``concurrency``), made on the running loop."""
        if self._sem is None:
            self._loop = asyncio.get_running_loop()
            self._sem = asyncio.Semaphore(self.concurrency)
        return self._sem

    def _backend(self, req: LLMRequest) -> Backend:
        key = (req.backend, req.endpoint)
        found = self._backends.get(key)
        if found is None:  # lazy: no SDK import (or network) until the first call
            self.slots()
            found = backend_class(req.backend)(dict(req.endpoint), self.timeout_s,
                                               self.max_retries, self.batch_poll_s)
            found.store = self.cache
            self._backends[key] = found
        return found

    # -- calls ---------------------------------------------------------------------------
    async def complete(self, req: LLMRequest,
                       validate: Callable[[dict], Any] | None = None,
                       format_retries: int = FORMAT_RETRIES) -> LLMResponse:
        """One model call (or a cache hit). ``validate(parsed)`` raising ValueError marks a
        structured output as unusable: it is not cached and the call is tried again, up to
        ``format_retries`` more times. A grading response's cost, and the call
        (:func:`call_info`), go to the current cost meter (raglab.llm.cost)."""
        resp = await self._complete(req, validate, format_retries)
        meter = current_meter()
        if meter is not None and req.purpose != "generate":
            meter.add(resp.cost_usd)
            meter.call(call_info(req, resp))
        return resp

    async def _complete(self, req: LLMRequest, validate: Callable[[dict], Any] | None = None,
                        format_retries: int = FORMAT_RETRIES) -> LLMResponse:
        if self.closed:
            raise LLMCallError("the LLM client is closed")
        key = req.cache_key()
        hit = self.cache.get("llm", key) if self.cache is not None else None
        if hit is not None and self._usable(hit, req, validate):
            try:
                resp = LLMResponse(**{**hit, "cached": True})
            except TypeError:  # an entry of another shape: ask again
                pass
            else:
                self.cache_hits += 1
                return resp
        fut = self._inflight.get(key)
        if fut is not None:  # the same request is already on its way: share its answer
            return await asyncio.shield(fut)
        fut = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            resp = await self._complete_uncached(req, validate, format_retries)
        except asyncio.CancelledError:
            fut.cancel()
            raise
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved: no "never retrieved" warning when nobody shares it
            raise
        else:
            fut.set_result(resp)
            if self.cache is not None:
                self.cache.put("llm", key, {k: v for k, v in asdict(resp).items()
                                            if k != "cached"})
            return resp
        finally:
            self._inflight.pop(key, None)

    @staticmethod
    def _usable(hit: dict, req: LLMRequest, validate: Callable | None) -> bool:
        if req.schema is None or validate is None:
            return True
        try:
            validate(hit.get("parsed"))
            return True
        except (ValueError, TypeError, KeyError):
            return False

    async def _complete_uncached(self, req: LLMRequest, validate: Callable[[dict], Any] | None,
                                 format_retries: int = FORMAT_RETRIES) -> LLMResponse:
        backend = self._backend(req)
        batch = self.mode == "batch" and req.purpose != "generate" and backend.batches
        problem = ""
        unusable = False  # the last answer was read and was unusable
        n_unusable = sent = 0
        while sent <= FORMAT_RETRIES and n_unusable <= format_retries:
            if unusable:
                self.fallbacks["format_re_asks"] += 1
            unusable = False
            sent += 1
            try:
                reply, latency, batch = await self._send(backend, req, batch)
            except CallFailed as e:
                raise LLMCallError(f"{req.model}: {_one_line(e)}") from None
            except backend.errors as e:
                raise LLMCallError(f"{req.model}: {type(e).__name__}: {_one_line(e)}") from None
            except (ValueError, UnicodeDecodeError) as e:  # a body that is not JSON
                problem = f"unreadable response body ({_one_line(e)})"
                continue
            self.calls += 1
            usage = {f: int(reply.usage.get(f, 0) or 0) for f in USAGE_FIELDS}
            cost = cost_usd(usage, self.prices.get(req.model), batch)
            for f, n in usage.items():
                self.usage_totals[f] += n
            if cost is not None:
                self.total_cost_usd += cost
            else:
                self.priced = False
                self.unpriced_calls += 1
            text = reply.text
            parsed = None
            if req.schema is not None:
                try:
                    parsed = json_in(backend.structured_text(req, text))
                    if not isinstance(parsed, dict):
                        raise ValueError("not a JSON object")
                    if validate is not None:
                        validate(parsed)
                except (ValueError, TypeError, KeyError) as e:
                    why = reply.stop_reason
                    why = f" (stop_reason {why})" if why not in (None, backend.normal_stop) \
                        else ""
                    problem = f"unusable structured output{why}: {_one_line(e)}"
                    unusable = True
                    n_unusable += 1
                    continue
            return LLMResponse(text=text, parsed=parsed, usage=usage, cost_usd=cost,
                               latency_ms=round(latency, 3), cached=False)
        error = LLMFormatError if unusable else LLMCallError
        raise error(f"{req.model}: {problem} after {sent} attempts")

    async def _send(self, backend: Backend, req: LLMRequest,
                    batch: bool) -> tuple[Any, float, bool]:
        """The backend's reply, the call's latency in ms (online: not counting the wait
        for a slot; batch: from queueing to the result) and whether it went in a batch (a
        server without a batch API answers online)."""
        if batch:
            t0 = time.perf_counter()
            try:
                reply = await backend.send_batched(req)
                return reply, (time.perf_counter() - t0) * 1000, True
            except BatchUnavailable:
                pass
        async with self.slots():
            t0 = time.perf_counter()
            reply = await backend.send(req)
            return reply, (time.perf_counter() - t0) * 1000, False

    def complete_sync(self, req: LLMRequest) -> LLMResponse:
        """For worker threads: run :meth:`complete` on the client's event loop and wait."""
        if self._loop is None:
            raise RuntimeError("LLMClient.complete_sync needs a client made on a running loop")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError("complete_sync called on the client's own event loop; "
                               "await complete() instead")
        return asyncio.run_coroutine_threadsafe(self.complete(req), self._loop).result()

    # -- closing -------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """What this client spent in this process (cache hits cost nothing)."""
        return {"requests": self.calls, "cache_hits": self.cache_hits, "batches": self.batches,
                **self.usage_totals, **self._fallbacks(),
                "cost_usd": round(self.total_cost_usd, 6) if self.priced else None}

    def counters(self) -> dict[str, Any]:
        """What this client spent so far, as counters that only grow (``cost_usd`` of the
        priced calls, ``unpriced`` calls apart): :func:`usage_between` two of them is what
        was spent in between."""
        return {"requests": self.calls, "cache_hits": self.cache_hits, "batches": self.batches,
                **self.usage_totals, **self._fallbacks(), "cost_usd": self.total_cost_usd,
                "unpriced": self.unpriced_calls}

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        for b in self._backends.values():  # kept: their counts stay readable
            await b.aclose()


#: the fields of a usage record (``model_usage``): requests made, cache hits, batch jobs,
#: tokens, structured-output fallbacks, and the cost in USD (None when a call had no known
#: price)
USAGE_KEYS = ("requests", "cache_hits", "batches", *USAGE_FIELDS, *FALLBACK_FIELDS, "cost_usd")


def usage_between(now: dict[str, Any], before: dict[str, Any] | None) -> dict[str, Any]:
    """The usage spent from counters ``before`` (None: nothing) to counters ``now`` (both
    from :meth:`LLMClient.counters`), as a usage record."""
    before = before or {}
    out: dict[str, Any] = {k: now[k] - before.get(k, 0) for k in USAGE_KEYS if k != "cost_usd"}
    unpriced = now["unpriced"] - before.get("unpriced", 0)
    out["cost_usd"] = None if unpriced else round(now["cost_usd"] - before.get("cost_usd", 0.0),
                                                  9)
    return out


def add_usage(total: dict[str, Any] | None, part: Any) -> dict[str, Any]:
    """``total`` plus the usage record ``part`` (as a record holds it; anything else, as an
    older record's missing one, adds nothing): cost None once any part's cost is."""
    out: dict[str, Any] = dict(total) if total else {**dict.fromkeys(USAGE_KEYS, 0),
                                                      "cost_usd": 0.0}
    if not isinstance(part, dict):
        return out
    for k in USAGE_KEYS:
        v = part.get(k)
        if k == "cost_usd":
            out[k] = None if v is None or out[k] is None else out[k] + float(v)
        elif isinstance(v, int | float) and not isinstance(v, bool):
            out[k] += int(v)
    return out


def require_api_key(what: str) -> None:
    """Fail before any work when the SDK would find no key (the key itself is never read
    into raglab's own state)."""
    if not os.environ.get("ANTHROPIC_API_KEY"):
        raise ConfigError(f"{what} needs ANTHROPIC_API_KEY in the environment "
                          "(and ANTHROPIC_BASE_URL for a non-default endpoint)")
