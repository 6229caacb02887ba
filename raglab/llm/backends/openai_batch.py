"""OpenAI's Batch API for ``mode: batch`` of the ``openai`` backend
(:class:`raglab.llm.backends.openai.OpenAIBackend` mixes :class:`BatchAPI` in).

- Requests are queued and sent as one batch once no new request arrived for ``QUIET_S``
  (or ``BATCH_MAX`` are queued; more than one when the file would pass ``MAX_BYTES``):
  a JSON Lines file of ``/v1/chat/completions`` requests
  (one ``custom_id`` each) uploaded with ``files.create(purpose="batch")``, then
  ``batches.create(endpoint="/v1/chat/completions", completion_window="24h")``, polled every
  ``batch_poll_s`` with ``batches.retrieve`` until it ends, its ``output_file_id`` and
  ``error_file_id`` read with ``files.content``, then its three files deleted (the input
  file too when no batch was created from it). The client prices its answers at half.
- Resume: once a batch is created, each of its requests is written to the stage cache
  (namespace ``llm_batch``, by the request's cache key and the server's URL) with the batch
  id and its ``custom_id``. A run killed while the batch is pending asks again for the same
  requests when it resumes; each is then collected from that batch, not sent (and paid for)
  again. A journalled batch is read once per process: a request asked again after its answer
  was unusable goes into a new batch. A journalled batch that cannot be read any more (failed,
  its files gone, another server) is forgotten and its requests sent in a new one, as is a
  request that failed or expired in it (a resume that runs an errored case again asks anew).
- Structured output: a request whose line refuses it (the backend's ``schema_refused``: an
  HTTP 400 naming ``response_format`` to ``json_schema``) is sent again in a new batch, as
  the backend's ``batch_request`` then makes it (``text``), as is every later one.
- A server without the Batch API (HTTP 404 or 405 on ``/v1/files`` or ``/v1/batches``, as
  most local servers) raises :class:`~raglab.llm.backends.BatchUnavailable`: the client
  sends the request online at the online price, and this backend sends every later one
  online; one note on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from dataclasses import dataclass
from typing import Any

from raglab.cache import content_key
from raglab.llm.backends import BatchUnavailable, CallFailed, Reply, fail_pending
from raglab.secrets import clip_line

QUIET_S = 0.2
BATCH_MAX = 50_000  # OpenAI's limit of requests per batch
MAX_BYTES = 190 * 2 ** 20  # under OpenAI's 200 MB limit of a batch's input file
ENDPOINT = "/v1/chat/completions"
JOURNAL = "llm_batch"  # the stage-cache namespace of submitted batch requests
ENDED = ("completed", "failed", "expired", "cancelled")
NO_BATCH_API = (404, 405)
NOTE = ("raglab: note: the OpenAI-compatible server has no Batch API (HTTP {status} on "
        "/v1/files or /v1/batches): mode=batch requests are sent online, at the online price")


@dataclass
class _Pending:
    req: Any
    key: str  # its journal key
    future: asyncio.Future
    body: str = ""  # its request body as JSON, made once when its batch is cut (_parts)


def chat_reply(resp: Any) -> Reply:
    """A Chat Completions response (the SDK's object) as raglab's reply."""
    choice = resp.choices[0] if resp.choices else None
    text = (choice.message.content or "") if choice is not None else ""
    u = resp.usage
    prompt = int(getattr(u, "prompt_tokens", 0) or 0)
    details = getattr(u, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0)
    usage = {"input_tokens": max(0, prompt - cached),
             "output_tokens": int(getattr(u, "completion_tokens", 0) or 0),
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached}
    stop = choice.finish_reason if choice is not None else "no choices"
    if choice is not None and not text and getattr(choice.message, "refusal", None):
        stop = "refusal"  # a structured output the model declined to give
    return Reply(text=text, usage=usage, stop_reason=stop)


def result_reply(line: dict) -> Reply:
    """One line of a batch's output or error file as a reply; CallFailed (one line) for a
    request that failed or expired."""
    from openai.types.chat import ChatCompletion

    err = line.get("error")
    if err:
        code = err.get("code") if isinstance(err, dict) else None
        msg = err.get("message") if isinstance(err, dict) else err
        raise CallFailed(clip_line(f"batch request failed: {code or 'error'}: {msg}", 280))
    response = line.get("response") or {}
    status = response.get("status_code")
    body = response.get("body")
    if status != 200 or not isinstance(body, dict):
        detail = body.get("error") if isinstance(body, dict) else body
        if isinstance(detail, dict):
            detail = detail.get("message")
        raise CallFailed(clip_line(f"batch request failed: HTTP {status}: {detail}", 280))
    try:
        return chat_reply(ChatCompletion.model_validate(body))
    except ValueError as e:
        raise CallFailed(clip_line(f"batch request: unreadable response: {e}", 280)) from None


def names_response_format(line: dict) -> bool:
    """Whether a batch's result line is an HTTP 400 (or 422) whose error names
    ``response_format`` (a model without that structured output)."""
    response = line.get("response") or {}
    return response.get("status_code") in (400, 422) \
        and "response_format" in json.dumps(response.get("body"))


def read_lines(text: str) -> dict[str, dict]:
    """The lines of a batch's output or error file, by ``custom_id`` (unreadable lines
    skipped: their requests get no result)."""
    out: dict[str, dict] = {}
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
            out[line["custom_id"]] = line
    return out


class BatchAPI:
    """``send_batched`` through OpenAI's Batch API (a mixin of the openai backend: it uses
    ``self.sdk``, ``self.params(req)``, ``self.endpoint``, ``self.batch_poll_s``)."""

    sdk: Any
    endpoint: dict[str, Any]
    batch_poll_s: float
    store: Any
    batches = True

    def params(self, req: Any) -> dict[str, Any]:
        raise NotImplementedError

    def _batch_state(self) -> dict[str, Any]:
        st = self.__dict__.get("_batch")
        if st is None:
            st = self.__dict__["_batch"] = {
                "queue": [], "arrived": asyncio.Event(), "flusher": None, "jobs": set(),
                "seq": 0, "sent": 0, "collect": {}, "read": set(), "noted": False}
        return st

    @property
    def batch_jobs(self) -> int:
        return int(self._batch_state()["sent"])

    def _journal_key(self, req: Any) -> str:
        return content_key(JOURNAL, req.cache_key(), self.endpoint.get("base_url") or "")

    async def send_batched(self, req: Any) -> Reply:
        if not self.batches:
            raise BatchUnavailable("no Batch API")
        st = self._batch_state()
        key = self._journal_key(req)
        store = getattr(self, "store", None)
        known = store.get(JOURNAL, key) if store is not None and key not in st["read"] else None
        if isinstance(known, dict) and known.get("batch") and known.get("custom_id"):
            st["read"].add(key)  # once per process: asked again, it goes to a new batch
            try:
                lines = await self._collect(known["batch"])
            except CallFailed:
                lines = {}
            line = lines.get(known["custom_id"])
            if line is not None and not self.schema_refused(req, line):
                try:
                    return result_reply(line)
                except CallFailed:
                    pass  # failed or expired there: asked again, in a new batch
        line = await self._queued(req, key)
        if self.schema_refused(req, line):  # asked again as text, in a new batch
            line = await self._queued(req, key)
        return result_reply(line)

    async def _queued(self, req: Any, key: str) -> dict:
        """The result line of ``req`` sent in the next batch."""
        st = self._batch_state()
        pending = _Pending(req, key, asyncio.get_running_loop().create_future())
        st["queue"].append(pending)
        st["arrived"].set()
        if st["flusher"] is None or st["flusher"].done():
            st["flusher"] = asyncio.create_task(self._flush_loop())
        return await pending.future

    def batch_request(self, req: Any) -> Any:
        """``req`` as a batch sends it (the backend's: in its structured-output fallback)."""
        return req

    def schema_refused(self, req: Any, line: dict) -> bool:
        """Whether a batch's ``line`` for ``req`` refused its structured output, so that it is
        to be sent again (as :meth:`batch_request` then makes it)."""
        return False

    async def _flush_loop(self) -> None:
        st = self._batch_state()
        while st["queue"]:
            st["arrived"].clear()
            if len(st["queue"]) < BATCH_MAX:
                try:
                    await asyncio.wait_for(st["arrived"].wait(), QUIET_S)
                    continue  # something new arrived: wait for quiet again
                except TimeoutError:
                    pass
            todo, st["queue"] = st["queue"][:BATCH_MAX], st["queue"][BATCH_MAX:]
            for part in self._parts(todo):
                job = asyncio.create_task(self._run_batch(part))
                st["jobs"].add(job)
                job.add_done_callback(st["jobs"].discard)

    def _parts(self, todo: list[_Pending]) -> list[list[_Pending]]:
        """``todo`` cut into batches whose input files stay under ``MAX_BYTES``."""
        out: list[list[_Pending]] = [[]]
        size = 0
        for p in todo:
            p.body = json.dumps(self.params(self.batch_request(p.req)))
            n = len(p.body.encode("utf-8")) + 100
            if out[-1] and size + n > MAX_BYTES:
                out.append([])
                size = 0
            out[-1].append(p)
            size += n
        return out

    def _collect(self, batch_id: str) -> asyncio.Future:
        """The result lines of a batch, by ``custom_id``, once it has ended (one poller per
        batch, shared by every request waiting for it)."""
        st = self._batch_state()
        task = st["collect"].get(batch_id)
        if task is None:
            task = st["collect"][batch_id] = asyncio.ensure_future(self._poll(batch_id))
        return asyncio.shield(task)

    async def _poll(self, batch_id: str) -> dict[str, dict]:
        import openai

        try:
            batch = await self.sdk.batches.retrieve(batch_id)
            while batch.status not in ENDED:
                await asyncio.sleep(self.batch_poll_s)
                batch = await self.sdk.batches.retrieve(batch_id)
            lines: dict[str, dict] = {}
            for fid in (batch.error_file_id, batch.output_file_id):
                if fid:
                    content = await self.sdk.files.content(fid)
                    lines.update(read_lines(content.text))
            for fid in (batch.input_file_id, batch.output_file_id, batch.error_file_id):
                if fid:  # read: its files are not left on the server
                    with contextlib.suppress(openai.APIError):
                        await self.sdk.files.delete(fid)
        except openai.APIError as e:
            raise CallFailed(f"batch job failed: {type(e).__name__}: {e}") from None
        if not lines and batch.status != "completed":
            errors = getattr(getattr(batch, "errors", None), "data", None) or []
            why = "; ".join(str(getattr(x, "message", x)) for x in errors[:3])
            raise CallFailed(f"batch job {batch.status}" + (f": {why}" if why else ""))
        return lines

    async def _run_batch(self, todo: list[_Pending]) -> None:
        import openai

        st = self._batch_state()
        by_id: dict[str, _Pending] = {}
        for p in todo:
            st["seq"] += 1
            by_id[f"r{st['seq']}-{p.key[:12]}"] = p
        try:
            head = '"method": "POST", "url": ' + json.dumps(ENDPOINT)
            jsonl = "".join(f'{{"custom_id": {json.dumps(cid)}, {head}, "body": {p.body}}}\n'
                            for cid, p in by_id.items())
            upload = None
            try:
                upload = await self.sdk.files.create(
                    file=("raglab-batch.jsonl", jsonl.encode("utf-8"), "application/jsonl"),
                    purpose="batch")
                batch = await self.sdk.batches.create(
                    input_file_id=upload.id, endpoint=ENDPOINT, completion_window="24h")
            except Exception as e:
                if upload is not None:  # no batch reads it: not left on the server
                    with contextlib.suppress(openai.APIError):
                        await self.sdk.files.delete(upload.id)
                if not isinstance(e, openai.APIStatusError) \
                        or e.status_code not in NO_BATCH_API:
                    raise
                self._no_batch_api(e.status_code, by_id.values())
                return
            st["sent"] += 1
            store = getattr(self, "store", None)
            for cid, p in by_id.items():  # before the first poll: a kill from here resumes
                st["read"].add(p.key)
                if store is not None:
                    store.put(JOURNAL, p.key, {"batch": batch.id, "custom_id": cid})
            lines = await self._collect(batch.id)
            for cid, line in lines.items():
                if cid in by_id:
                    p = by_id.pop(cid)
                    if not p.future.done():
                        p.future.set_result(line)
        except asyncio.CancelledError:
            self._fail(by_id.values(), "batch job cancelled")
            raise
        except CallFailed as e:
            self._fail(by_id.values(), str(e))
        except Exception as e:
            self._fail(by_id.values(), f"batch job failed: {type(e).__name__}: {e}")
        self._fail(by_id.values(), "no result in the batch")

    def _no_batch_api(self, status: int, pendings: Any) -> None:
        """Every request from now on goes online (said once)."""
        st = self._batch_state()
        self.batches = False
        if not st["noted"]:
            st["noted"] = True
            print(NOTE.format(status=status), file=sys.stderr, flush=True)
        for p in pendings:
            if not p.future.done():
                p.future.set_exception(BatchUnavailable("no Batch API"))

    _fail = staticmethod(fail_pending)

    async def close_batches(self) -> None:
        """Stop waiting for batches (their requests fail; a resume collects them)."""
        st = self.__dict__.get("_batch")
        if st is None:
            return
        tasks = [t for t in (st["flusher"], *st["jobs"], *st["collect"].values())
                 if t is not None and not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._fail(st["queue"], "the LLM client was closed")
        st["queue"].clear()
