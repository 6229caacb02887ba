"""Progress: a rich bar on a terminal, plain lines otherwise (or nothing)."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, done: int, mode: str = "auto"):
        self.total, self.done = total, done
        tty = sys.stderr.isatty()
        self.mode = ("bar" if tty else "plain") if mode == "auto" else mode
        self.errors = 0
        self._last = 0.0
        self._bar = None
        if self.mode == "bar":
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(transient=True)
            self._task = self._bar.add_task("cases", total=total, completed=done)
            self._bar.start()
        elif self.mode == "plain" and done:
            print(f"resuming: {done}/{total} cases already recorded", file=sys.stderr)

    def add(self, done: int, errors: int) -> None:
        """``done`` more cases, ``errors`` of them with an error."""
        if not done:
            return
        self.done += done
        self.errors += errors
        if self._bar is not None:
            self._bar.advance(self._task, done)
        elif self.mode == "plain":
            now = time.monotonic()
            if now - self._last > 5 or self.done == self.total:
                self._last = now
                print(f"cases {self.done}/{self.total} ({self.errors} with errors)",
                      file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
