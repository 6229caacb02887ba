"""The two LLM backends as the end-to-end tests see them: a fake server of each wire
protocol, the environment that points a raglab subprocess at it, and its request log."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.graders.fake_anthropic import TEST_KEY, FakeAnthropic
from tests.llm.fake_openai import CHAT, TEST_OPENAI_KEY, FakeOpenAI


@dataclass(frozen=True)
class Backend:
    name: str  # the LLM backend
    grader: str  # grader=NAME
    generator: str  # generator=NAME
    server: Callable[..., Any]  # FakeX(handler=...)
    path: str  # the POST path of one model call
    key: str
    key_var: str
    url_var: str

    def env(self, srv: Any, key: bool = True) -> dict[str, str]:
        """The environment of a raglab subprocess pointed at ``srv`` (no other backend's
        variables, so nothing reaches a real API)."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        env[self.url_var] = srv.base_url if self.name == "openai" else srv.url
        if key:
            env[self.key_var] = self.key
        return env

    def requests(self, srv: Any) -> list[dict]:
        return srv.calls(self.path)


ANTHROPIC = Backend("anthropic", "claude", "anthropic", FakeAnthropic, "/v1/messages",
                    TEST_KEY, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
OPENAI = Backend("openai", "openai", "openai", FakeOpenAI, CHAT, TEST_OPENAI_KEY,
                 "OPENAI_API_KEY", "OPENAI_BASE_URL")
BACKENDS = [ANTHROPIC, OPENAI]
