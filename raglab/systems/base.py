"""The adapter protocol between raglab and a system under test (SUT).

Adapters (``system`` group) are registered with :func:`raglab.registry.register` and made
from ``(run config, dataset, stage cache, work counter, LLM client or None)``.

A system receives one case (question, filters, user) plus the run's configuration sections
and returns a :class:`~raglab.data.schema.SystemOutput`. Example (docs/adapters.md)::

    from raglab.data.schema import SystemOutput

    class MySystem:
        def answer(self, request: SystemRequest) -> SystemOutput:
            hits = my_search(request.question, request.filters, request.user)
            return SystemOutput(case_id=request.case_id, candidates=hits, context=hits[:5],
                                answer=my_llm(request.question, hits[:5]))

    def make_system(options: dict) -> MySystem:   # system._target_=my_pkg.make_system
        return MySystem()
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from raglab.data.schema import Case, SystemOutput, User


@dataclass(frozen=True)
class SystemRequest:
    """What a system under test is asked: one case and the run's configuration. A turn of a
    conversation also carries the messages before it (``history``, OpenAI style
    ``{"role": "user"|"assistant", "content"}``: the earlier questions and the reference
    answers, or the system's own with ``conversation.history=own``), its conversation's id
    and its 1-based ``turn``; a single-turn case has none."""

    case_id: str
    question: str
    filters: dict[str, Any]
    user: User | None
    config: dict[str, Any] = field(default_factory=dict)
    history: tuple[dict[str, str], ...] = ()
    conversation_id: str | None = None
    turn: int | None = None

    @classmethod
    def from_case(cls, case: Case, config: dict[str, Any],
                  history: list[dict[str, str]] | None = None) -> SystemRequest:
        """``history``: the turn's messages when not its frozen one (own answers)."""
        conv = case.conversation
        if conv is None:
            return cls(case.id, case.question, dict(case.filters), case.user, config)
        if history is None:
            history = [m.model_dump() for m in conv.history]
        return cls(case.id, case.question, dict(case.filters), case.user, config,
                   tuple(history), conv.id, conv.turn)

    def messages(self) -> list[dict[str, str]]:
        """The history and then the question, as a chat API takes them."""
        return [*map(dict, self.history), {"role": "user", "content": self.question}]

    def as_json(self) -> dict[str, Any]:
        """The request as JSON (what the http system posts). A turn's also has its
        ``history``, ``messages`` (the history and the question, a chat API's input),
        ``conversation_id`` and ``turn``; a single-turn request has none of them."""
        out: dict[str, Any] = {
            "case_id": self.case_id, "question": self.question, "filters": self.filters,
            "user": self.user.model_dump() if self.user else None, "config": self.config}
        if self.conversation_id is not None:
            out.update(history=[dict(m) for m in self.history], messages=self.messages(),
                       conversation_id=self.conversation_id, turn=self.turn)
        return out


class ValidatedOutput(dict):
    """A SystemOutput JSON object already validated, defaults filled (what ``model_dump``
    of :class:`SystemOutput` gives): the runner takes it as it is."""


@runtime_checkable
class SystemUnderTest(Protocol):
    """Anything with ``answer(request) -> SystemOutput`` (a dict of that shape is accepted)."""

    def answer(self, request: SystemRequest) -> SystemOutput | dict[str, Any]: ...


WORK_FIELDS = ("index_builds", "retrievals", "generations", "grader_calls", "grader_cache_hits")


class WorkCounter:
    """What a run computed itself rather than took from a cache (thread-safe)."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._n = dict.fromkeys(WORK_FIELDS, 0)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._n[name] += n

    def __getattr__(self, name: str) -> int:
        if name in WORK_FIELDS:
            return self._n[name]
        raise AttributeError(name)

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return dict(self._n)
