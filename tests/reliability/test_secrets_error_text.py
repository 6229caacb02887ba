"""Issue 24, defect 3: partial secrets survived because error text was cut before it was
scrubbed (``raw[:120]`` of a malformed body kept 55 of 62 characters of a token; pydantic's
``input_value=`` kept the last 22). Scrub, then cut; never quote a system's value."""

from __future__ import annotations

import json

import pytest

import raglab.secrets
from raglab.secrets import Scrubber
from raglab.systems.base import SystemRequest
from raglab.systems.http import HttpSystem, HttpSystemCfg, HttpSystemError
from tests.http_stub import post_server

TOKEN = "sk-live-" + "Q7b2Xw9KpL4mZ8rT3vN6yH1cF5dJ0sGe" + "Ua2Wq8Eo4Ri6Ty1Pl9Mk"  # 62 characters
PIECES = [TOKEN[i:i + 8] for i in range(len(TOKEN) - 7)]


def _no_piece(text: str) -> None:
    assert not [p for p in PIECES if p in text], text


@pytest.fixture
def known_token(monkeypatch):
    monkeypatch.setattr(raglab.secrets, "SCRUBBER", Scrubber({TOKEN}, environment=False))


@pytest.fixture
def reply():
    state: dict = {}

    def respond(h):
        status, body = state["reply"]
        h.send_response(status)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    with post_server(respond) as url:
        def make(status: int, body: bytes) -> HttpSystem:
            state["reply"] = (status, body)
            return HttpSystem(HttpSystemCfg(name="http", url=url, retries=0))

        yield make


@pytest.mark.parametrize("pad", [40, 66, 88, 100])
def test_a_malformed_body_is_scrubbed_before_it_is_cut(known_token, reply, pad):
    body = ('{"answer": "' + "x" * pad + " Bearer " + TOKEN + " and more").encode()
    with pytest.raises(HttpSystemError, match="malformed JSON") as e:
        reply(200, body).answer(SystemRequest("c1", "q?", {}, None, {}))
    _no_piece(str(e.value))


@pytest.mark.parametrize("pad", [100, 180, 190])
def test_an_error_page_is_scrubbed_before_it_is_cut(known_token, reply, pad):
    with pytest.raises(HttpSystemError, match="HTTP 400") as e:
        reply(400, ("e" * pad + " " + TOKEN).encode()).answer(
            SystemRequest("c1", "q?", {}, None, {}))
    _no_piece(str(e.value))


@pytest.mark.parametrize("body", [
    {"answer": {"text": f"echo Bearer {TOKEN}"}},
    {"answer": "a", "latency_ms": {"total": f"Bearer {TOKEN}"}},
    {"answer": "a", "candidates": [{"doc_id": "d", "start": f"{TOKEN}"}]},
])
def test_a_wrong_type_around_a_secret_is_named_without_its_value(known_token, reply, body):
    with pytest.raises(HttpSystemError, match="output contract") as e:
        reply(200, json.dumps(body).encode()).answer(SystemRequest("c1", "q?", {}, None, {}))
    _no_piece(str(e.value))


def test_a_system_output_validation_message_never_quotes_a_value():
    """What a python system returns is validated by the runner: the message it records
    names the field and the problem, never the value."""
    from pydantic import ValidationError

    from raglab.data.schema import SystemOutput

    with pytest.raises(ValidationError) as e:
        SystemOutput.model_validate({"case_id": "c", "answer": {"t": f"echo {TOKEN}"}})
    assert "answer" in str(e.value)
    _no_piece(str(e.value))
