"""The local fake of the OpenAI API (:mod:`tests.llm.fake_openai`) with the Batch API:
``/v1/files`` (upload, ``/content``) and ``/v1/batches`` (create, retrieve), answering each
batch request as the same request sent to ``/v1/chat/completions`` would be answered.

    with FakeOpenAIBatch(handler=fake_model) as srv:
        srv.hold = True          # batches stay in_progress until released
        srv.calls(BATCHES, "POST")   # the batches created

``batch_polls``: retrieves answered ``in_progress`` before a batch completes (when not held).
``keep_files``: deleting a file is answered 404 (a server that keeps them).
``result_faults``: one per batch request, in order: ``"error"`` (an HTTP 400 line in the
error file; a ``response_format`` type not in ``supports`` is one too, naming it),
``"expired"`` (a ``batch_expired`` line in the error file), None (answered).
The plain :class:`~tests.llm.fake_openai.FakeOpenAI` has no Batch API (HTTP 404), as most
local servers.
"""

from __future__ import annotations

import email
import json
import time
import uuid
from collections import deque
from typing import Any

from tests.graders.fake_anthropic import fake_model
from tests.llm.fake_openai import CHAT, FakeOpenAI, _ChatHandler, fake_openai_env

FILES = "/v1/files"
BATCHES = "/v1/batches"


class FakeOpenAIBatch(FakeOpenAI):
    def __init__(self, handler=None, supports: tuple[str, ...] = ("json_schema", "json_object"),
                 batch_polls: int = 1):
        super().__init__(handler, supports)
        self.batch_polls = batch_polls
        self.hold = False
        self.result_faults: deque = deque()
        self.files: dict[str, dict] = {}
        self.openai_batches: dict[str, dict] = {}
        self.deleted: dict[str, dict] = {}  # files deleted by the client
        self.keep_files = False  # True: a DELETE is answered 404, the file kept
        self.no_batches = False  # True: files, but POST /v1/batches is answered 404

    # -- inspection -------------------------------------------------------------------------
    def batch_requests(self, batch_id: str) -> list[dict]:
        """The request lines of a batch's input file."""
        b = self.openai_batches[batch_id]
        f = self.files.get(b["input_file_id"]) or self.deleted[b["input_file_id"]]
        text = f["content"].decode()
        return [json.loads(x) for x in text.splitlines() if x.strip()]

    # -- objects ----------------------------------------------------------------------------
    def add_file(self, content: bytes, purpose: str, filename: str) -> dict:
        f = {"id": f"file-{uuid.uuid4().hex[:20]}", "object": "file", "bytes": len(content),
             "created_at": int(time.time()), "filename": filename, "purpose": purpose,
             "status": "processed", "content": content}
        with self._lock:
            self.files[f["id"]] = f
        return f

    def batch_json(self, b: dict) -> dict:  # type: ignore[override]
        done = b["status"] == "completed"
        n = len(self.batch_requests(b["id"]))
        return {"id": b["id"], "object": "batch", "endpoint": b["endpoint"],
                "errors": None, "input_file_id": b["input_file_id"],
                "completion_window": b["completion_window"], "status": b["status"],
                "output_file_id": b.get("output_file_id"),
                "error_file_id": b.get("error_file_id"), "created_at": b["created_at"],
                "completed_at": int(time.time()) if done else None, "metadata": None,
                "request_counts": {"total": n, "completed": b.get("ok", 0) if done else 0,
                                   "failed": b.get("failed", 0) if done else 0}}

    def finish(self, b: dict) -> None:
        """Answer every request of ``b`` as an ordinary call would be answered."""
        out, err = [], []
        for r in self.batch_requests(b["id"]):
            fault = self.result_faults.popleft() if self.result_faults else None
            body = r["body"]
            rf = (body.get("response_format") or {}).get("type")
            line: dict[str, Any] = {"id": f"batch_req_{uuid.uuid4().hex[:16]}",
                                    "custom_id": r["custom_id"], "response": None,
                                    "error": None}
            if fault == "expired":
                line["error"] = {"code": "batch_expired",
                                 "message": "This request could not be executed before the "
                                            "completion window expired."}
                err.append(line)
                continue
            if fault == "error" or (rf is not None and rf not in self.supports):
                msg = "fake invalid_request_error" if fault == "error" else \
                    f"response_format type {rf!r} is not supported"  # as the online fake
                line["response"] = {"status_code": 400, "request_id": uuid.uuid4().hex,
                                    "body": {"error": {"message": msg,
                                                       "type": "invalid_request_error"}}}
                err.append(line)
                continue
            line["response"] = {"status_code": 200, "request_id": uuid.uuid4().hex,
                                "body": self.completion(body)}
            out.append(line)
        for key, lines in (("output_file_id", out), ("error_file_id", err)):
            if lines:
                data = "".join(json.dumps(x) + "\n" for x in lines).encode()
                b[key] = self.add_file(data, "batch_output", f"{key}.jsonl")["id"]
        b["ok"], b["failed"], b["status"] = len(out), len(err), "completed"


class _BatchHandler(_ChatHandler):
    server_fake: FakeOpenAIBatch  # type: ignore[assignment]

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?")[0]
        fake = self.server_fake
        if path == FILES:
            n = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(n) if n else b""
            self._record({"multipart": len(raw)})
            msg = email.message_from_bytes(
                f"Content-Type: {self.headers['content-type']}\r\n\r\n".encode() + raw)
            fields: dict[str, Any] = {}
            for part in msg.get_payload() if msg.is_multipart() else []:
                name = part.get_param("name", header="content-disposition")
                fields[name] = (part.get_payload(decode=True), part.get_filename())
            content, filename = fields.get("file", (b"", None))
            purpose = (fields.get("purpose", (b"", None))[0] or b"").decode()
            f = fake.add_file(content or b"", purpose, filename or "upload")
            return self._send(200, {k: v for k, v in f.items() if k != "content"})
        if path == BATCHES:
            body = self._read_body()
            self._record(body)
            if fake.no_batches:
                return self._error(404, "not_found_error")
            if body.get("input_file_id") not in fake.files or body.get("endpoint") != CHAT:
                return self._error(400, "invalid_request_error")
            b = {"id": f"batch_{uuid.uuid4().hex[:20]}", "status": "in_progress", "polls": 0,
                 "input_file_id": body["input_file_id"], "endpoint": body["endpoint"],
                 "completion_window": body["completion_window"],
                 "created_at": int(time.time())}
            with fake._lock:
                fake.openai_batches[b["id"]] = b
            return self._send(200, fake.batch_json(b))
        return super().do_POST()

    def do_DELETE(self) -> None:  # noqa: N802
        self._record(None)
        fake = self.server_fake
        parts = self.path.split("?")[0].strip("/").split("/")
        with fake._lock:
            f = fake.files.pop(parts[2], None) if parts[:2] == ["v1", "files"] \
                and not fake.keep_files else None
            if f is not None:
                fake.deleted[f["id"]] = f
        if f is None:
            return self._error(404, "not_found_error")
        return self._send(200, {"id": f["id"], "object": "file", "deleted": True})

    def do_GET(self) -> None:  # noqa: N802
        self._record(None)
        fake = self.server_fake
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[3] == "content":
            f = fake.files.get(parts[2])
            if f is None:
                return self._error(404, "not_found_error")
            return self._send(200, f["content"], ctype="application/octet-stream")
        if parts[:2] == ["v1", "batches"] and len(parts) == 3:
            finish = False
            with fake._lock:
                b = fake.openai_batches.get(parts[2])
                if b is not None and b["status"] != "completed" and not b.get("finishing"):
                    b["polls"] += 1
                    finish = b["finishing"] = not fake.hold and b["polls"] >= fake.batch_polls
            if finish:
                fake.finish(b)  # (its answers take the lock themselves)
            if b is None:
                return self._error(404, "not_found_error")
            return self._send(200, fake.batch_json(b))
        return self._error(404, "not_found_error")


try:
    import pytest

    @pytest.fixture
    def fake_openai_batch(monkeypatch: Any):
        """A running fake with the Batch API and the deterministic grader model, and the SDK
        pointed at it."""
        with FakeOpenAIBatch(handler=fake_model) as srv:
            fake_openai_env(monkeypatch, srv)
            yield srv
except ImportError:  # usable without pytest, as a plain context manager
    pass


FakeOpenAIBatch.handler_class = _BatchHandler
