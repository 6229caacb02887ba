"""Claude through Anthropic's SDK: the Messages API, Message Batches for ``mode: batch``, and
prompt caching of a system prompt sent with ``cache_control``.

One ``anthropic.AsyncAnthropic`` per client and event loop, made lazily. The key and
endpoint come from the environment as the SDK reads them (``ANTHROPIC_API_KEY``,
``ANTHROPIC_BASE_URL``); raglab never stores, prints or logs the key. Transport retries
(429 with ``retry-after``, 529, 5xx, connection errors, timeouts) are the SDK's, with
``max_retries`` and ``timeout`` from the config.

Batch mode: requests are queued and sent as one Message Batches job once no new request
arrived for ``BATCH_QUIET_S`` (or ``BATCH_MAX`` are queued).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from raglab.llm.backends import Backend, CallFailed, Reply, fail_pending, register_backend

BATCH_QUIET_S = 0.2
BATCH_MAX = 10_000
USAGE = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
         "cache_read_input_tokens")


@dataclass
class _Pending:
    req: Any
    future: asyncio.Future


def messages_params(req: Any) -> dict[str, Any]:
    """The Messages API parameters of a request."""
    # No sampling parameters: API version 2026-10-21 (what SDK 2.x sends) rejects
    # temperature/top_p/top_k with HTTP 400 at any value, so raglab has none to set.
    p: dict[str, Any] = {"model": req.model, "max_tokens": req.max_tokens,
                         "messages": [{"role": "user", "content": req.user}]}
    if req.system:
        p["system"] = ([{"type": "text", "text": req.system,
                         "cache_control": {"type": "ephemeral"}}]
                       if req.cache_system else req.system)
    if req.schema is not None:
        p["output_config"] = {"format": {"type": "json_schema", "schema": req.schema}}
    return p


def _reply(msg: Any) -> Reply:
    usage = {f: int(getattr(msg.usage, f, 0) or 0) for f in USAGE}
    text = "".join(getattr(b, "text", "") for b in (msg.content or [])
                   if getattr(b, "type", None) == "text")
    return Reply(text=text, usage=usage, stop_reason=msg.stop_reason)


@register_backend("anthropic")
class AnthropicBackend(Backend):
    normal_stop = "end_turn"
    batches = True

    def __init__(self, endpoint: dict[str, Any], timeout_s: float, max_retries: int,
                 batch_poll_s: float = 30.0) -> None:
        super().__init__(endpoint, timeout_s, max_retries, batch_poll_s)
        import anthropic  # lazy: no SDK import (or network) until the first call

        self.errors = (anthropic.APIError,)
        self.sdk: Any = anthropic.AsyncAnthropic(timeout=timeout_s, max_retries=max_retries)
        self._queue: list[_Pending] = []
        self._arrived: asyncio.Event | None = None
        self._flusher: asyncio.Task | None = None
        self._jobs: set[asyncio.Task] = set()
        self._seq = 0
        self._batch_jobs = 0

    @classmethod
    def preload(cls) -> None:
        import anthropic  # noqa: F401  (a required dependency; slow to import)

    async def send(self, req: Any) -> Reply:
        return _reply(await self.sdk.messages.create(**messages_params(req)))

    @property
    def batch_jobs(self) -> int:
        return self._batch_jobs

    # -- batch mode ----------------------------------------------------------------------
    async def send_batched(self, req: Any) -> Reply:
        if self._arrived is None:
            self._arrived = asyncio.Event()
        pending = _Pending(req, asyncio.get_running_loop().create_future())
        self._queue.append(pending)
        self._arrived.set()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_loop())
        return _reply(await pending.future)

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

        sdk = self.sdk
        by_id: dict[str, _Pending] = {}
        for p in todo:
            self._seq += 1
            by_id[f"r{self._seq}"] = p
        try:
            batch = await sdk.messages.batches.create(
                requests=[{"custom_id": cid, "params": messages_params(p.req)}
                          for cid, p in by_id.items()])
            self._batch_jobs += 1
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
                    p.future.set_exception(CallFailed(f"batch request {r.type}{why}"))
        except anthropic.APIError as e:
            self._fail(by_id.values(), f"batch job failed: {type(e).__name__}: {e}")
        except asyncio.CancelledError:
            self._fail(by_id.values(), "batch job cancelled")
            raise
        except Exception as e:
            self._fail(by_id.values(), f"batch job failed: {type(e).__name__}: {e}")
        self._fail(by_id.values(), "no result in the batch")

    _fail = staticmethod(fail_pending)

    async def aclose(self) -> None:
        tasks = [t for t in (self._flusher, *self._jobs) if t is not None and not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._fail(self._queue, "the LLM client was closed")
        self._queue.clear()
        await self.sdk.close()
