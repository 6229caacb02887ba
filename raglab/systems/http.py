"""HTTP adapter: POST each case and the run's configuration as JSON, read a SystemOutput.

Request body (application/json)::

    {"case_id": "...", "question": "...", "filters": {...},
     "user": {"id": ..., "groups": [...]} | null,
     "config": {"chunker": {...}, "embedder": {...}, "reranker": {...}, "k": 5,
                "candidate_depth": 50, "context_token_budget": 1500, "prompt": {...},
                "generator": {...}}}

Response: 200 with a SystemOutput JSON object (raglab.data.schema.SystemOutput; ``case_id`` may be
omitted). Fields the system adds are kept (on a hit: in its ``metadata``; on the output: in
``extra``), with one warning per run naming them (raglab.data.schema.accept_output). The body
counts against ``max_body_bytes`` as decoded (a gzip bomb stops there). Retried with
exponential backoff (``retries`` times): connection errors, timeouts, 5xx answers, 429, and
bodies cut short (a Content-Length not reached, a torn chunked body);
a ``Retry-After`` header (seconds or an HTTP date) is honoured up to ``max_retry_after_s``.
Other 4xx answers and malformed bodies (not JSON, NaN/Infinity, wrong shape) fail that case
at once. ``read_timeout_s`` bounds the whole request, not each read: a server sending a byte
every half second still fails the case at the deadline. ``run_deadline_s`` bounds the whole
run: once past, every remaining case fails at once (and heals on resume).
"""

from __future__ import annotations

import email.utils
import threading
import time
from typing import Any, Literal

from pydantic import Field, model_validator

from raglab.components import NO_CONTEXT, BuildContext, System
from raglab.config import UNLISTED
from raglab.data.finite import NotFiniteError
from raglab.data.finite import loads as finite_loads
from raglab.data.schema import Strict, SystemOutput
from raglab.registry import register
from raglab.secrets import clip_bytes
from raglab.systems.base import SystemRequest
from raglab.systems.outputs import MAX_BODY_BYTES, AddedFieldsWarning, read_output


class HttpSystemError(RuntimeError):
    pass


class HttpSystemCfg(Strict):
    name: Literal["http"]
    url: str
    connect_timeout_s: float = Field(5.0, gt=0, le=3600)
    read_timeout_s: float = Field(60.0, gt=0, le=86400)
    retries: int = Field(3, ge=0, le=100)
    backoff_s: float = Field(0.5, ge=0, le=3600)
    concurrency: int = Field(4, ge=1, le=1024)
    headers: dict[str, str] = Field(default_factory=dict)
    # not in conf/system/http.yaml (set with +system.FIELD=VALUE)
    max_retry_after_s: float = Field(30.0, ge=0, le=3600, json_schema_extra=UNLISTED)
    run_deadline_s: float | None = Field(None, gt=0, le=30 * 86400,
                                         json_schema_extra=UNLISTED)
    max_body_bytes: int = Field(MAX_BODY_BYTES, gt=0, le=2 ** 31,
                                json_schema_extra=UNLISTED)

    @model_validator(mode="after")
    def _http_url(self):
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        return self


class _Retry(Exception):
    def __init__(self, message: str, wait_s: float | None = None):
        super().__init__(message)
        self.wait_s = wait_s


@register("system", "http", config=HttpSystemCfg)
class HttpSystem(System):
    def __init__(self, cfg: HttpSystemCfg, ctx: BuildContext = NO_CONTEXT):
        import requests

        self.cfg = cfg
        self.ctx = ctx
        self._session = requests.Session()
        self._slots = threading.BoundedSemaphore(cfg.concurrency)
        self._run_deadline = (time.monotonic() + cfg.run_deadline_s
                              if cfg.run_deadline_s else None)
        self._warn_added = AddedFieldsWarning()

    def answer(self, req: SystemRequest) -> SystemOutput:
        body = req.as_json()
        attempt = 0
        while True:
            if self._run_deadline is not None and time.monotonic() >= self._run_deadline:
                raise HttpSystemError(f"run deadline of {self.cfg.run_deadline_s:g} s passed "
                                      "(system.run_deadline_s); run again to resume")
            try:
                with self._slots:
                    data = self._request(body)
                added: list[str] = []
                out = self._parse_data(data, req.case_id, added)
                self._warn_added(added)
                return out
            except _Retry as r:
                if attempt >= self.cfg.retries:
                    raise HttpSystemError(f"{r} (after {attempt + 1} attempt(s))") from None
                wait = self.cfg.backoff_s * (2 ** attempt)
                if r.wait_s is not None:
                    wait = max(wait, min(r.wait_s, self.cfg.max_retry_after_s))
                if self._run_deadline is not None:
                    wait = min(wait, max(0.0, self._run_deadline - time.monotonic()))
                time.sleep(wait)
                attempt += 1

    def _request(self, body: dict[str, Any]) -> Any:
        """One POST, read within a total deadline of read_timeout_s; the parsed JSON."""
        import requests

        cfg = self.cfg
        deadline = time.monotonic() + cfg.read_timeout_s
        if self._run_deadline is not None:
            deadline = min(deadline, self._run_deadline)
        try:
            resp = self._session.post(cfg.url, json=body, headers=dict(cfg.headers),
                                      timeout=(cfg.connect_timeout_s, cfg.read_timeout_s),
                                      stream=True)
        except (requests.ConnectionError, requests.Timeout) as e:
            raise _Retry(f"{type(e).__name__}: {e}") from None
        with resp:
            from urllib3.exceptions import ProtocolError, ReadTimeoutError

            try:
                raw = self._read_body(resp, deadline)
            except (requests.exceptions.ChunkedEncodingError, requests.ConnectionError,
                    ProtocolError) as e:
                raise _Retry(f"response body cut short ({type(e).__name__})") from None
            except (requests.Timeout, ReadTimeoutError, TimeoutError):
                raise _Retry(f"no complete answer within {cfg.read_timeout_s:g} s "
                             "(read_timeout_s bounds the whole request)") from None
            status = resp.status_code
            if status >= 300:
                text = clip_bytes(raw, 200)
                err = f"HTTP {status}: {text}"
                if status == 429 or status >= 500:
                    raise _Retry(err, _retry_after(resp.headers.get("Retry-After")))
                raise HttpSystemError(err)
        try:
            return finite_loads(raw)
        except NotFiniteError as e:
            raise HttpSystemError(f"response: {e}") from None
        except (ValueError, UnicodeDecodeError):
            raise HttpSystemError(f"malformed JSON in response: {clip_bytes(raw, 120)!r}"
                                  ) from None

    def _read_body(self, resp, deadline: float) -> bytes:
        import requests

        expected = resp.headers.get("Content-Length")
        chunks: list[bytes] = []
        size = 0
        raw = resp.raw
        read = getattr(raw, "read1", None)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise requests.Timeout()
            _set_timeout(raw, left)
            chunk = read(65536, decode_content=True) if read is not None \
                else raw.read(65536, decode_content=True)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > self.cfg.max_body_bytes:
                raise HttpSystemError(f"response larger than {self.cfg.max_body_bytes} bytes "
                                      "(system.max_body_bytes)")
        data = b"".join(chunks)
        if expected is not None and expected.isdigit() and len(data) < int(expected) \
                and "content-encoding" not in {k.lower() for k in resp.headers}:
            raise requests.exceptions.ChunkedEncodingError("short body")
        return data

    @staticmethod
    def _parse_data(data: Any, case_id: str, added: list[str] | None = None) -> SystemOutput:
        """The validated output; the names of the fields the system added go to ``added``."""
        return read_output(data, case_id, "response", HttpSystemError, added)


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (a number or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _set_timeout(raw: Any, seconds: float) -> None:
    """Bound the next socket read by what is left of the request's deadline."""
    try:
        sock = raw._fp.fp.raw._sock  # urllib3 HTTPResponse -> http.client -> socket
    except AttributeError:
        return
    try:
        sock.settimeout(max(0.01, seconds))
    except OSError:
        pass
