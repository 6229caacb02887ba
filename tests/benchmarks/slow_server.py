"""The fake Messages API server in a process of its own, answering after a fixed latency
(so its work does not share the benchmark's interpreter). Prints its URL, then serves until
its standard input closes. Commands on standard input, each answered with one line:

- ``count``: the number of POST /v1/messages served so far;
- ``timeline``: JSON ``[[received, answered], ...]`` of those requests (``time.monotonic``,
  the clock the benchmark's process reads too) and the most answered at once.

    python -m tests.benchmarks.slow_server LATENCY_S

Each request is served by a thread of its own (``ThreadingHTTPServer``), so any number wait
out their latency together; Nagle's algorithm is off (see ``fake_anthropic._Handler``).
"""

from __future__ import annotations

import json
import sys
import time

from tests.graders.fake_anthropic import FakeAnthropic, fake_model


def main() -> None:
    latency = float(sys.argv[1])

    def slow(body):
        time.sleep(latency)
        return fake_model(body)

    with FakeAnthropic(handler=slow) as srv:
        print(srv.url, flush=True)
        for line in sys.stdin:
            cmd = line.strip()
            calls = srv.calls("/v1/messages")
            if cmd == "count":
                print(len(calls), flush=True)
            elif cmd == "timeline":
                print(json.dumps({"requests": [[c["t"], c.get("t_end")] for c in calls],
                                  "peak": srv.peak_in_flight}), flush=True)


if __name__ == "__main__":
    main()
