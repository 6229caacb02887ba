"""The fake Messages API server in a process of its own, answering after a fixed latency
(so its work does not share the benchmark's interpreter). Prints its URL, then serves until
its standard input closes; prints the number of requests served on exit.

    python -m tests.benchmarks.slow_server LATENCY_S
"""

from __future__ import annotations

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
        for line in sys.stdin:  # "count" asks for the number of requests so far
            if line.strip() == "count":
                print(len(srv.calls("/v1/messages")), flush=True)


if __name__ == "__main__":
    main()
