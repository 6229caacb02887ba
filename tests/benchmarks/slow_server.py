"""The fake Messages API server (or, with ``openai``, the fake Chat Completions one) in a
process of its own, answering after a fixed latency (so its work does not share the
benchmark's interpreter). Prints its URL (the SDK's base URL), then serves until its standard
input closes. Commands on standard input, each answered with one line:

- ``count``: the number of model calls (POST /v1/messages, /v1/chat/completions) so far;
- ``timeline``: JSON ``[[received, answered], ...]`` of those requests (``time.monotonic``,
  the clock the benchmark's process reads too) and the most answered at once.

    python -m tests.benchmarks.slow_server LATENCY_S [anthropic|openai]

Each request is served by a thread of its own (``ThreadingHTTPServer``), so any number wait
out their latency together; Nagle's algorithm is off (see ``fake_anthropic._Handler``).
"""

from __future__ import annotations

import json
import sys
import time

from tests.graders.fake_anthropic import fake_model
from tests.llm.backends import ANTHROPIC, OPENAI


def main() -> None:
    latency = float(sys.argv[1])
    be = OPENAI if sys.argv[2:] == ["openai"] else ANTHROPIC

    def slow(body):
        time.sleep(latency)
        return fake_model(body)

    with be.server(handler=slow) as srv:
        print(srv.base_url if be is OPENAI else srv.url, flush=True)
        for line in sys.stdin:
            cmd = line.strip()
            calls = be.requests(srv)
            if cmd == "count":
                print(len(calls), flush=True)
            elif cmd == "timeline":
                print(json.dumps({"requests": [[c["t"], c.get("t_end")] for c in calls],
                                  "peak": srv.peak_in_flight}), flush=True)


if __name__ == "__main__":
    main()
