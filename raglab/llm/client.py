"""The one LLM client of raglab: every model call (grader and generator) goes through it.

- One ``anthropic.AsyncAnthropic`` per client, made lazily on the running event loop. The key
  and endpoint come from the environment as the SDK reads them (``ANTHROPIC_API_KEY``,
  ``ANTHROPIC_BASE_URL``); raglab never stores, prints or logs the key.
- Transport retries (429 with ``retry-after``, 529, 5xx, connection errors, timeouts) are the
  SDK's, with backoff and jitter, ``max_retries`` and ``timeout`` from the config. A body
  that cannot be parsed, or a structured output that does not parse or validate, is tried
  up to ``FORMAT_RETRIES`` more times here; then :class:`LLMCallError` (one line).
- Responses are cached in the stage cache (namespace ``llm``) by the full request content;
  a hit makes no call and returns ``cached=True`` with the usage and cost first recorded.
- ``mode="batch"``: grading requests are queued and sent as one Message Batches job once
  no new request arrived for ``BATCH_QUIET_S`` (or ``BATCH_MAX`` are queued); batch prices
  are half the online ones. Generation requests always go online (their latency matters).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from raglab.cache import content_key
from raglab.errors import ConfigError
from raglab.llm.cost import current_meter

FORMAT_RETRIES = 2
BATCH_QUIET_S = 0.2
BATCH_MAX = 10_000
USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                "cache_read_input_tokens")
PRICE_OF = {"input_tokens": "input", "output_tokens": "output",
            "cache_creation_input_tokens": "cache_write", "cache_read_input_tokens": "cache_read"}


class LLMCallError(Exception):
    """A model call that still failed after its retries (one line, no secrets)."""


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

    def cache_key(self) -> str:
        extra = ("repeat", self.repeat) if self.repeat else ()
        return content_key("anthropic", self.model, self.max_tokens,
                           self.system, self.user, self.schema, *extra)

    def params(self) -> dict[str, Any]:
        """The Messages API parameters of this request."""
        # No sampling parameters: API version 2026-10-21 (what SDK 2.x sends) rejects
        # temperature/top_p/top_k with HTTP 400 at any value, so raglab has none to set.
        p: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens,
                             "messages": [{"role": "user", "content": self.user}]}
        if self.system:
            p["system"] = ([{"type": "text", "text": self.system,
                             "cache_control": {"type": "ephemeral"}}]
                           if self.cache_system else self.system)
        if self.schema is not None:
            p["output_config"] = {"format": {"type": "json_schema", "schema": self.schema}}
        return p


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


@dataclass
class _Pending:
    req: LLMRequest
    future: asyncio.Future
    t0: float = field(default_factory=time.perf_counter)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:300] or type(e).__name__


def cost_usd(usage: dict, prices: dict[str, float] | None, batch: bool) -> float | None:
    """USD of one call from ``prices`` (USD per million tokens); None when not priced."""
    if not prices:
        return None
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
        self.batches = 0
        self.usage_totals = dict.fromkeys(USAGE_FIELDS, 0)
        self.priced = True  # False once a call had no known price
        self.closed = False
        self._client: Any = None
        self._sem: asyncio.Semaphore | None = None
        self._inflight: dict[str, asyncio.Future] = {}
        self._queue: list[_Pending] = []
        self._arrived: asyncio.Event | None = None
        self._flusher: asyncio.Task | None = None
        self._jobs: set[asyncio.Task] = set()
        self._seq = 0
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    # -- the SDK client ------------------------------------------------------------------
    def _sdk(self) -> Any:
        if self._client is None:
            import anthropic  # lazy: no SDK import (or network) until the first call

            self._loop = asyncio.get_running_loop()
            self._client = anthropic.AsyncAnthropic(timeout=self.timeout_s,
                                                    max_retries=self.max_retries)
            self._sem = asyncio.Semaphore(self.concurrency)
        return self._client

    # -- calls ---------------------------------------------------------------------------
    async def complete(self, req: LLMRequest,
                       validate: Callable[[dict], Any] | None = None) -> LLMResponse:
        """One model call (or a cache hit). ``validate(parsed)`` raising ValueError marks a
        structured output as unusable: it is not cached and the call is tried again. A
        grading response's cost goes to the current cost meter (raglab.llm.cost)."""
        resp = await self._complete(req, validate)
        meter = current_meter()
        if meter is not None and req.purpose != "generate":
            meter.add(resp.cost_usd)
        return resp

    async def _complete(self, req: LLMRequest,
                        validate: Callable[[dict], Any] | None = None) -> LLMResponse:
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
            resp = await self._complete_uncached(req, validate)
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

    async def _complete_uncached(self, req: LLMRequest,
                                 validate: Callable[[dict], Any] | None) -> LLMResponse:
        import anthropic

        batch = self.mode == "batch" and req.purpose != "generate"
        self._sdk()
        problem = ""
        for _ in range(FORMAT_RETRIES + 1):
            try:
                msg, latency = await (self._via_batch(req) if batch else self._via_messages(req))
            except anthropic.APIError as e:
                raise LLMCallError(f"{req.model}: {type(e).__name__}: {_one_line(e)}") from None
            except (ValueError, UnicodeDecodeError) as e:  # a body that is not JSON
                problem = f"unreadable response body ({_one_line(e)})"
                continue
            self.calls += 1
            usage = {f: int(getattr(msg.usage, f, 0) or 0) for f in USAGE_FIELDS}
            cost = cost_usd(usage, self.prices.get(req.model), batch)
            for f, n in usage.items():
                self.usage_totals[f] += n
            if cost is not None:
                self.total_cost_usd += cost
            else:
                self.priced = False
            text = "".join(getattr(b, "text", "") for b in (msg.content or [])
                           if getattr(b, "type", None) == "text")
            parsed = None
            if req.schema is not None:
                try:
                    parsed = json.loads(text)
                    if not isinstance(parsed, dict):
                        raise ValueError("not a JSON object")
                    if validate is not None:
                        validate(parsed)
                except (ValueError, TypeError, KeyError) as e:
                    why = msg.stop_reason
                    why = f" (stop_reason {why})" if why not in (None, "end_turn") else ""
                    problem = f"unusable structured output{why}: {_one_line(e)}"
                    continue
            return LLMResponse(text=text, parsed=parsed, usage=usage, cost_usd=cost,
                               latency_ms=round(latency, 3), cached=False)
        raise LLMCallError(f"{req.model}: {problem} after {FORMAT_RETRIES + 1} attempts")

    async def _via_messages(self, req: LLMRequest) -> tuple[Any, float]:
        """The message and the call's latency in ms (not counting the wait for a slot)."""
        sdk = self._sdk()
        assert self._sem is not None
        async with self._sem:
            t0 = time.perf_counter()
            msg = await sdk.messages.create(**req.params())
            return msg, (time.perf_counter() - t0) * 1000

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

    # -- batch mode ----------------------------------------------------------------------
    async def _via_batch(self, req: LLMRequest) -> tuple[Any, float]:
        """The message and the time from queueing to its result, in ms."""
        self._sdk()
        if self._arrived is None:
            self._arrived = asyncio.Event()
        pending = _Pending(req, asyncio.get_running_loop().create_future())
        self._queue.append(pending)
        self._arrived.set()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_loop())
        msg = await pending.future
        return msg, (time.perf_counter() - pending.t0) * 1000

    async def _flush_loop(self) -> None:
        assert self._arrived is not None
        while self._queue:
            self._arrived.clear()
            if len(self._queue) < BATCH_MAX:
                try:
                    await asyncio.wait_for(self._arrived.wait(), BATCH_QUIET_S)
                    continue  # something new arrived: wait for quiet again
                except TimeoutError:
                    pass
            todo, self._queue = self._queue[:BATCH_MAX], self._queue[BATCH_MAX:]
            job = asyncio.create_task(self._run_batch(todo))
            self._jobs.add(job)
            job.add_done_callback(self._jobs.discard)

    async def _run_batch(self, todo: list[_Pending]) -> None:
        import anthropic

        sdk = self._sdk()
        by_id: dict[str, _Pending] = {}
        for p in todo:
            self._seq += 1
            by_id[f"r{self._seq}"] = p
        try:
            batch = await sdk.messages.batches.create(
                requests=[{"custom_id": cid, "params": p.req.params()}
                          for cid, p in by_id.items()])
            self.batches += 1
            while batch.processing_status != "ended":
                await asyncio.sleep(self.batch_poll_s)
                batch = await sdk.messages.batches.retrieve(batch.id)
            results = await sdk.messages.batches.results(batch.id)
            async for item in results:
                if item.custom_id not in by_id:
                    continue
                p = by_id.pop(item.custom_id)
                if p.future.done():
                    continue
                r = item.result
                if r.type == "succeeded":
                    p.future.set_result(r.message)
                else:
                    err = getattr(getattr(r, "error", None), "error", None)
                    why = f": {getattr(err, 'message', '')}" if err is not None else ""
                    p.future.set_exception(LLMCallError(
                        f"{p.req.model}: batch request {r.type}{why}"[:300]))
        except anthropic.APIError as e:
            self._fail(by_id.values(), f"batch job failed: {type(e).__name__}: {_one_line(e)}")
        except asyncio.CancelledError:
            self._fail(by_id.values(), "batch job cancelled")
            raise
        except Exception as e:
            self._fail(by_id.values(), f"batch job failed: {type(e).__name__}: {_one_line(e)}")
        self._fail(by_id.values(), "no result in the batch")

    @staticmethod
    def _fail(pendings: Any, message: str) -> None:
        for p in pendings:
            if not p.future.done():
                p.future.set_exception(LLMCallError(message))

    # -- closing -------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """What this client spent in this process (cache hits cost nothing)."""
        return {"requests": self.calls, "cache_hits": self.cache_hits, "batches": self.batches,
                **self.usage_totals,
                "cost_usd": round(self.total_cost_usd, 6) if self.priced else None}

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        tasks = [t for t in (self._flusher, *self._jobs) if t is not None and not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._fail(self._queue, "the LLM client was closed")
        self._queue.clear()
        if self._client is not None:
            await self._client.close()
            self._client = None


def require_api_key(what: str) -> None:
    """Fail before any work when the SDK would find no key (the key itself is never read
    into raglab's own state)."""
    if not os.environ.get("ANTHROPIC_API_KEY"):
        raise ConfigError(f"{what} needs ANTHROPIC_API_KEY in the environment "
                          "(and ANTHROPIC_BASE_URL for a non-default endpoint)")
