"""The wire protocols of the one LLM client (:mod:`raglab.llm.client`).

A backend is one module of this package named after it (``anthropic``, ``openai``) whose
class is registered with :func:`register_backend`; a plugin module may register one the
same way. The client owns what every backend shares (the response cache, retries of
unusable structured output, concurrency, usage and cost, in-flight de-duplication); a
backend only sends one request and reads back its text, usage and stop reason::

    @register_backend("mine")
    class Mine(Backend):
        def __init__(self, endpoint, timeout_s, max_retries): ...
        async def send(self, req): return Reply(text, usage, stop_reason)

``endpoint`` is the request's ``endpoint`` (where to send it: a base URL, never a key);
``usage`` uses raglab's fields (:data:`raglab.llm.client.USAGE_FIELDS`). A component picks
its backend by the ``backend`` of its requests and adds the backend's options to its own
config schema (for example :class:`raglab.llm.backends.openai.OpenAIOptions`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from raglab.errors import ConfigError


@dataclass
class Reply:
    """What a backend read back: the model's text, raglab's usage fields, the stop reason
    (``None`` or the backend's normal one when the output is complete)."""

    text: str
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None


class CallFailed(Exception):
    """A call that failed in a way the backend already put in one line (a batch request
    that errored or expired, a closed client)."""


def fail_pending(pendings: Any, message: str) -> None:
    """Fail each batched request still waiting (its future) with ``message`` (one line)."""
    from raglab.secrets import clip_line

    for p in pendings:
        if not p.future.done():
            p.future.set_exception(CallFailed(clip_line(message, 280)))


class BatchUnavailable(Exception):
    """``send_batched`` found no batch API on the server: the client sends the request
    online, at the online price."""


class Backend:
    """The contract of a backend (defaults for the optional parts)."""

    #: the stop reason of a complete output (others are reported with a format failure)
    normal_stop: ClassVar[str] = "stop"
    #: has a batch API (``mode: batch``); otherwise batch-mode requests are sent online
    batches: ClassVar[bool] = False
    #: the SDK's errors that end a call (after the SDK's own transport retries)
    errors: tuple[type[BaseException], ...] = ()
    #: the client's stage cache (or None), where a backend may note the batches it sent
    store: Any = None

    def __init__(self, endpoint: dict[str, Any], timeout_s: float, max_retries: int,
                 batch_poll_s: float = 30.0) -> None:
        self.endpoint = dict(endpoint)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.batch_poll_s = batch_poll_s

    @classmethod
    def preload(cls) -> None:
        """Import the SDK (slow) before any case is timed; raise a ConfigError when the
        optional extra it needs is missing."""

    async def send(self, req: Any) -> Reply:
        raise NotImplementedError

    async def send_batched(self, req: Any) -> Reply:
        """A request of ``mode: batch`` (only called when :attr:`batches`); raises
        :class:`BatchUnavailable` when the server turns out to have no batch API."""
        raise NotImplementedError

    def structured_text(self, req: Any, text: str) -> str:
        """The JSON text of a structured output (the whole text, by default)."""
        return text

    @property
    def batch_jobs(self) -> int:
        return 0

    async def aclose(self) -> None:
        return None


_BACKENDS: dict[str, type[Backend]] = {}
B = TypeVar("B", bound=Backend)


def register_backend(name: str) -> Callable[[type[B]], type[B]]:
    def deco(cls: type[B]) -> type[B]:
        old = _BACKENDS.get(name)
        if old is not None and old is not cls and (old.__module__, old.__qualname__) != (
                cls.__module__, cls.__qualname__):
            raise ValueError(f"LLM backend {name!r} is already registered by "
                             f"{old.__module__}.{old.__qualname__}")
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise ValueError(f"{cls!r} must subclass raglab.llm.backends.Backend")
        _BACKENDS[name] = cls
        return cls

    return deco


def backend_class(name: str) -> type[Backend]:
    """The backend registered as ``name`` (raglab's own module of that name is imported
    on first use)."""
    if name not in _BACKENDS and name.isidentifier():
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    if name not in _BACKENDS:
        raise ConfigError(f"unknown LLM backend {name!r} (known: "
                          f"{', '.join(sorted({*_BACKENDS, 'anthropic', 'openai'}))})")
    return _BACKENDS[name]
