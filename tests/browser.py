"""A headless Chromium driven over the DevTools protocol, through a pipe (no extra package).

``--remote-debugging-pipe`` makes Chromium read protocol commands from fd 3 and write
replies and events to fd 4, each message a JSON object ended by a NUL byte. Used by the
browser tests to open MLflow's UI (a JavaScript app), wait until a page shows some text,
read its rendered text and DOM, take screenshots, and collect console errors.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


class Browser:
    def __init__(self, profile: Path, width: int = 1440, height: int = 1000):
        to_child, self._to_chrome = os.pipe()
        self._from_chrome, from_child = os.pipe()
        os.set_inheritable(to_child, True)
        os.set_inheritable(from_child, True)

        def fds():  # the child's fd 3 reads our commands, its fd 4 writes to us
            r, w = os.dup(to_child), os.dup(from_child)  # out of the way of 3 and 4
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--no-first-run", "--disable-default-apps", "--mute-audio",
             f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            preexec_fn=fds, close_fds=False, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        self._next = 0
        self._replies: dict[int, dict] = {}
        self._cv = threading.Condition()
        self.console_errors: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
        self.frames: dict[str, str] = {}  # out-of-process iframes: sessionId -> url
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call("Target.setAutoAttach", session=True, autoAttach=True,
                  waitForDebuggerOnStart=False, flatten=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width,
                  height=height, deviceScaleFactor=1, mobile=False)

    # -- protocol ---------------------------------------------------------------------------
    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cv:
                        self._replies[msg["id"]] = msg
                        self._cv.notify_all()
                else:
                    self._event(msg)

    def _event(self, msg: dict) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Target.attachedToTarget" and params["targetInfo"]["type"] == "iframe":
            self.frames[params["sessionId"]] = params["targetInfo"].get("url", "")
        elif method == "Target.detachedFromTarget":
            self.frames.pop(params.get("sessionId"), None)
        elif method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            self.console_errors.append("exception: " + str(
                (d.get("exception") or {}).get("description") or d.get("text")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.console_errors.append("console.error: " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            e = params["entry"]
            self.console_errors.append(f"log {e.get('source')}: {e.get('text')} {e.get('url', '')}")

    def call(self, method: str, session: bool | str = False, timeout: float = 60,
             **params: Any) -> dict:
        with self._cv:
            self._next += 1
            mid = self._next
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params}
        if session:
            msg["sessionId"] = session if isinstance(session, str) else self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cv:
            while mid not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{method}: no reply in {timeout} s")
                self._cv.wait(left)
            reply = self._replies.pop(mid)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    # -- pages ------------------------------------------------------------------------------
    def evaluate(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", session=True, expression=expression,
                        returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression[:80]}: {res['exceptionDetails'].get('text')}")
        return res.get("result", {}).get("value")

    def open(self, url: str) -> None:
        """Load ``url`` afresh (a hash change alone would leave a JS app's old state)."""
        self.call("Page.navigate", session=True, url="about:blank")
        self.frames.clear()
        self.call("Page.navigate", session=True, url=url)

    def text(self) -> str:
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def wait_for_text(self, *needles: str, timeout: float = 45) -> str:
        """The page's text once it shows every needle (TimeoutError with the text if not)."""
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if all(n in text for n in needles):
                return text
            time.sleep(0.5)
        raise TimeoutError(f"page never showed {needles!r}; it shows:\n{text[:3000]}")

    def frame_texts(self) -> list[str]:
        """The text of each out-of-process child frame (MLflow shows an HTML artifact in a
        sandboxed blob: iframe, which the page's own scripts cannot read)."""
        texts = []
        for sid in list(self.frames):
            try:
                res = self.call("Runtime.evaluate", session=sid, timeout=10,
                                expression="document.body ? document.body.innerText : ''",
                                returnByValue=True)
            except (RuntimeError, TimeoutError):
                continue
            texts.append(res.get("result", {}).get("value") or "")
        return texts

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except Exception:  # noqa: BLE001 - already gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
