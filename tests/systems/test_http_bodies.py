"""Issue 24, defect 15: a compressed body counts against ``system.max_body_bytes`` as
decoded (a gzip bomb fails its case at the bound, never as malformed JSON or an exhausted
memory), against a local server."""

from __future__ import annotations

import gzip

import pytest

from raglab.systems.base import SystemRequest
from raglab.systems.http import HttpSystem, HttpSystemCfg, HttpSystemError
from tests.http_stub import post_server

REQ = SystemRequest("c1", "q?", {}, None, {})
#: 200 MB of zeros: about 200 KB once compressed
BOMB = gzip.compress(b"\0" * (200 * 1024 * 1024), 9)
SMALL = gzip.compress(b'{"answer": "fine", "candidates": [{"doc_id": "kb/a"}]}')


@pytest.fixture
def gzip_server():
    state: dict = {}

    def respond(h):
        body, encoding, chunked = state["reply"]
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Encoding", encoding)
        try:
            if chunked:
                h.send_header("Transfer-Encoding", "chunked")
                h.end_headers()
                for i in range(0, len(body), 8192):
                    piece = body[i:i + 8192]
                    h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                h.wfile.write(b"0\r\n\r\n")
            else:
                h.send_header("Content-Length", str(len(body)))
                h.end_headers()
                h.wfile.write(body)
        except OSError:
            pass  # the client stopped reading at its bound

    with post_server(respond) as url:
        def make(body, encoding="gzip", chunked=False, **cfg):
            state["reply"] = (body, encoding, chunked)
            return HttpSystem(HttpSystemCfg(name="http", url=url, retries=0, **cfg))

        yield make


@pytest.mark.parametrize("body, encoding, chunked", [
    (BOMB, "gzip", False),
    (BOMB, "gzip", True),
    (gzip.compress(BOMB), "gzip, gzip", False),  # compressed twice: about 1 KB
])
def test_a_gzip_bomb_stops_at_max_body_bytes(gzip_server, body, encoding, chunked):
    sut = gzip_server(body, encoding, chunked, max_body_bytes=4 * 1024 * 1024)
    with pytest.raises(HttpSystemError, match=r"larger than 4194304 bytes \(system.max_body_bytes"):
        sut.answer(REQ)


def test_a_compressed_answer_within_the_bound_is_read(gzip_server):
    out = gzip_server(SMALL, max_body_bytes=1024).answer(REQ)
    assert out.answer == "fine" and out.candidates[0].doc_id == "kb/a"
