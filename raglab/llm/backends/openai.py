"""Any OpenAI-compatible server (OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp's server,
LM Studio) through the official ``openai`` SDK's Chat Completions (the ``openai`` extra,
:data:`raglab.errors.EXTRAS`; imported on first use).

- Endpoint: the request's ``base_url``, else ``OPENAI_BASE_URL``, else OpenAI's (the SDK
  reads the environment). Key: ``OPENAI_API_KEY`` as the SDK reads it; a local server
  needs none, so without one a placeholder is sent. raglab never stores, prints or logs it.
- Structured output, by the ``structured_output`` option: ``json_schema`` (``response_format``
  ``json_schema``, ``strict``; the first such call to a (server, model) is a probe: an HTTP
  400 or 422 to it, or an error naming ``response_format``, means the server has none, and
  the call and every later one to that model are sent as ``text``; remembered for the
  run's client only, counted as ``schema_unsupported``; in ``mode: batch``, a batch's HTTP
  400 naming ``response_format`` finds the same, and the request is sent again as ``text``
  in a new batch), ``json_object`` (JSON mode; the
  schema is stated in the system prompt) or ``text`` (no ``response_format``; the schema is
  stated in the system prompt and the first JSON object of the answer is read). The client
  validates the object and asks again, up to its bounded format retries, when it is
  unusable.
- Transport retries (429 with ``Retry-After``, 5xx, connection errors, timeouts) are the
  SDK's, with ``max_retries`` and ``timeout`` from the config.
- Usage: ``prompt_tokens`` (less the cached ones) as ``input_tokens``,
  ``prompt_tokens_details.cached_tokens`` as ``cache_read_input_tokens``,
  ``completion_tokens`` as ``output_tokens``.
- ``mode: batch``: OpenAI's Batch API, resumable after a kill; a server without it answers
  online (:mod:`raglab.llm.backends.openai_batch`).
- A response body is read up to ``max_body_bytes`` (64 MiB; counted as decoded, so a
  compressed body stops there too, as the http system adapter's): a larger one fails the
  call at once, not retried, in one line naming the setting.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from raglab.errors import ConfigError, install_line
from raglab.llm.backends import Backend, CallFailed, Reply, register_backend
from raglab.llm.backends.openai_batch import BatchAPI, chat_reply, names_response_format

EXTRA = install_line("openai")
DEFAULT_MAX_BODY = 64 * 1024 * 1024
#: sent as the key when OPENAI_API_KEY is unset (a local server that checks none)
NO_KEY = "no-key"
SCHEMA_NOTE = ("Reply with one JSON object and nothing else. It must match this JSON "
               "schema:\n<json_schema>\n{schema}\n</json_schema>")


class OpenAIEndpoint(BaseModel):
    """Where an OpenAI-compatible server is (part of a component's config schema)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    base_url: str | None = Field(None, description=(
        "the server's OpenAI-compatible API root, for example http://localhost:8000/v1; "
        "null: OPENAI_BASE_URL, else OpenAI's (never part of a metric version)"))
    token_limit: Literal["max_completion_tokens", "max_tokens"] = Field(
        "max_completion_tokens", description=(
            "the request field that carries max_tokens (some older servers know only "
            "max_tokens)"))
    # not in the conf files (set with +GROUP.max_body_bytes=N), as the http system's: the
    # marker of raglab.config.UNLISTED (a layer above this one)
    max_body_bytes: int = Field(DEFAULT_MAX_BODY, gt=0, le=2 ** 31, description=(
        "the largest response body read from the server, decoded (bytes); a larger one "
        "fails the call"), json_schema_extra={"conf": "unlisted"})


class OpenAIOptions(OpenAIEndpoint):
    """An OpenAI-compatible judge's settings (structured output)."""

    structured_output: Literal["json_schema", "json_object", "text"] = Field(
        "json_schema", description=(
            "json_schema: response_format json_schema (strict); json_object: JSON mode, the "
            "schema stated in the prompt; text: plain text, the schema stated in the prompt "
            "and the first JSON object read (servers without structured output)"))


def endpoint_of(cfg: Any) -> tuple[tuple[str, Any], ...]:
    """The request ``endpoint`` of a component config with :class:`OpenAIEndpoint`'s fields."""
    return (("base_url", cfg.base_url), ("max_body_bytes", cfg.max_body_bytes))


def options_of(cfg: Any) -> tuple[tuple[str, Any], ...]:
    """The request ``options`` of a component config (what is sent, so cache-keyed)."""
    opts: list[tuple[str, Any]] = [("token_limit", cfg.token_limit)]
    if hasattr(cfg, "structured_output"):
        opts.append(("structured_output", cfg.structured_output))
    return tuple(opts)


def check_usable(what: str, cfg: Any) -> None:
    """Fail before any work: the SDK missing, or OpenAI's own API without a key."""
    require_sdk(what)
    if not (cfg.base_url or os.environ.get("OPENAI_BASE_URL")
            or os.environ.get("OPENAI_API_KEY")):
        raise ConfigError(f"{what} needs OPENAI_API_KEY in the environment for OpenAI's API, "
                          f"or a server: {what.split('=')[0]}.base_url=URL (or OPENAI_BASE_URL)")


def require_sdk(what: str) -> None:
    try:
        import openai  # noqa: F401
    except ImportError:
        raise ConfigError(f"{what} needs the openai SDK: {EXTRA}") from None


def first_json_object(text: str) -> str:
    """The first JSON object in a text (a model's plain answer around it, a code fence);
    the text itself when there is none."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict):
            return text[start:end]
        start = text.find("{", end)
    return text


def wants_schema(req: Any) -> bool:
    """Whether a request asks for ``response_format`` ``json_schema``."""
    return req.schema is not None \
        and dict(req.options).get("structured_output", "json_schema") == "json_schema"


def as_text(req: Any) -> Any:
    """The request in ``text`` mode (no response_format; the schema stated in the prompt)."""
    opts = [(k, v) for k, v in req.options if k != "structured_output"]
    return dataclasses.replace(req, options=(*opts, ("structured_output", "text")))


@register_backend("openai")
class OpenAIBackend(BatchAPI, Backend):
    normal_stop = "stop"

    def __init__(self, endpoint: dict[str, Any], timeout_s: float, max_retries: int,
                 batch_poll_s: float = 30.0) -> None:
        super().__init__(endpoint, timeout_s, max_retries, batch_poll_s)
        require_sdk("the openai backend")
        import openai

        self.errors = (openai.APIError,)
        self.max_body_bytes = int(self.endpoint.get("max_body_bytes") or DEFAULT_MAX_BODY)
        kw: dict[str, Any] = {"timeout": timeout_s, "max_retries": max_retries,
                              "http_client": bounded_client(self.max_body_bytes, timeout_s)}
        if self.endpoint.get("base_url"):
            kw["base_url"] = self.endpoint["base_url"]
        if not os.environ.get("OPENAI_API_KEY"):
            kw["api_key"] = NO_KEY  # else the SDK reads the key from the environment
        self.sdk: Any = openai.AsyncOpenAI(**kw)
        #: model -> whether this server takes response_format json_schema (None: not probed)
        self.schema_support: dict[str, bool] = {}
        self.schema_unsupported = 0
        self._probing: dict[str, asyncio.Lock] = {}

    @classmethod
    def preload(cls) -> None:
        require_sdk("the openai backend")

    @staticmethod
    def params(req: Any) -> dict[str, Any]:
        """The Chat Completions parameters of a request."""
        opts = dict(req.options)
        mode = opts.get("structured_output", "json_schema")
        system = req.system
        if req.schema is not None and mode != "json_schema":
            note = SCHEMA_NOTE.format(schema=json.dumps(req.schema, sort_keys=True))
            system = f"{system}\n\n{note}" if system else note
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": req.user}]
        p: dict[str, Any] = {"model": req.model, "messages": messages,
                             opts.get("token_limit", "max_completion_tokens"): req.max_tokens}
        if req.schema is not None and mode == "json_schema":
            p["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "raglab_output", "schema": req.schema, "strict": True}}
        elif req.schema is not None and mode == "json_object":
            p["response_format"] = {"type": "json_object"}
        return p

    async def send(self, req: Any) -> Reply:
        if not wants_schema(req):
            return await self._send(req)
        known = self.schema_support.get(req.model)
        if known is None:  # the probe: one call per model, the others wait for its answer
            async with self._probing.setdefault(req.model, asyncio.Lock()):
                known = self.schema_support.get(req.model)
                if known is None:
                    return await self._probe(req)
        return await self._send(req if known else as_text(req))

    def batch_request(self, req: Any) -> Any:
        """In a batch, a model found without ``json_schema`` is asked in ``text``."""
        if self.schema_support.get(req.model) is False and wants_schema(req):
            return as_text(req)
        return req

    def schema_refused(self, req: Any, line: dict) -> bool:
        """A batch's HTTP 400 naming ``response_format`` to a ``json_schema`` request: the
        model is without it (as the online probe finds), and the request is sent again."""
        if not wants_schema(req) or not names_response_format(line):
            return False
        if self.schema_support.get(req.model) is not False:
            self.schema_support[req.model] = False
            self.schema_unsupported += 1
        return True

    async def _probe(self, req: Any) -> Reply:
        import openai

        try:
            reply = await self._send(req)
        except (openai.APIStatusError, CallFailed) as e:
            status = getattr(e, "status_code", None)
            if status not in (400, 422) and "response_format" not in str(e):
                raise
            reply = await self._send(as_text(req))  # its error, if it fails too
            self.schema_support[req.model] = False
            self.schema_unsupported += 1
            return reply
        self.schema_support[req.model] = True
        return reply

    async def _send(self, req: Any) -> Reply:
        import openai

        params = self.params(req)
        try:
            resp = await self.sdk.chat.completions.create(**params)
        except body_too_large() as e:
            raise CallFailed(str(e)) from None
        except openai.BadRequestError as e:
            if "response_format" not in params or "response_format" not in str(e):
                raise
            raise CallFailed(f"BadRequestError: {e} (a server without this structured "
                             "output: set structured_output: json_object or text)") from None
        return chat_reply(resp)

    def structured_text(self, req: Any, text: str) -> str:
        if dict(req.options).get("structured_output", "json_schema") == "json_schema" \
                and self.schema_support.get(req.model, True):
            return text
        return first_json_object(text)

    async def aclose(self) -> None:
        await self.close_batches()
        await self.sdk.close()


_BODY_TOO_LARGE: list[type[Exception]] = []


def body_too_large() -> type[Exception]:
    """The error of a response body over ``max_body_bytes``: an ``openai.OpenAIError``, which
    the SDK raises at once instead of retrying (made on first use: the SDK is imported
    lazily)."""
    if not _BODY_TOO_LARGE:
        import openai

        class BodyTooLarge(openai.OpenAIError):
            pass

        _BODY_TOO_LARGE.append(BodyTooLarge)
    return _BODY_TOO_LARGE[0]


def bounded_client(max_body_bytes: int, timeout_s: float) -> Any:
    """The SDK's own HTTP client, reading each response body up to ``max_body_bytes``
    (decoded) and raising :func:`body_too_large` past it, the connection closed."""
    import openai

    too_large = body_too_large()

    class Bounded(openai.DefaultAsyncHttpxClient):
        async def send(self, request: Any, *, stream: bool = False, **kw: Any) -> Any:
            response = await super().send(request, stream=True, **kw)
            if stream:  # (raglab reads whole answers; a stream is read by its caller)
                return response
            body = bytearray()
            try:
                async for chunk in response.aiter_bytes():  # decoded
                    body += chunk
                    if len(body) > max_body_bytes:
                        raise too_large(f"response larger than {max_body_bytes} bytes "
                                        "(max_body_bytes)")
            finally:
                await response.aclose()
            headers = [(k, v) for k, v in response.headers.multi_items()
                       if k.lower() not in ("content-encoding", "content-length",
                                            "transfer-encoding")]
            return type(response)(response.status_code, headers=headers, content=bytes(body),
                                  request=request, extensions=response.extensions,
                                  history=response.history,
                                  default_encoding=response.default_encoding)

    return Bounded(timeout=timeout_s)
