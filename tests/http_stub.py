"""A local HTTP/1.1 server for the tests of HTTP systems: each POST's body is read, then
``respond(handler)`` writes the reply (status, headers, body) with the handler's own calls."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def post_server(respond: Callable[[BaseHTTPRequestHandler], None]) -> Iterator[str]:
    """Serve on 127.0.0.1 until the block ends; yields the server's URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            respond(self)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_port}/"
    finally:
        srv.shutdown()
        srv.server_close()
