"""HTTP adapter: POST each case and the run's configuration as JSON, read a SystemOutput.

Request body (application/json)::

    {"case_id": "...", "question": "...", "filters": {...}, "user": {"id": ..., "groups": [...]} | null,
     "config": {"chunker": {...}, "embedder": {...}, "reranker": {...}, "k": 5,
                "candidate_depth": 50, "context_token_budget": 1500, "prompt": {...},
                "generator": {...}}}

Response: 200 with a SystemOutput JSON object (raglab.data.schema.SystemOutput; ``case_id`` may be
omitted). 5xx answers and connection errors are retried with exponential backoff; 4xx
answers and malformed bodies fail that case at once.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Literal

from pydantic import Field, model_validator

from raglab.data.schema import Strict, SystemOutput
from raglab.registry import register
from raglab.systems.base import SystemRequest


class HttpSystemError(RuntimeError):
    pass


class HttpSystemCfg(Strict):
    name: Literal["http"]
    url: str
    connect_timeout_s: float = Field(5.0, gt=0)
    read_timeout_s: float = Field(60.0, gt=0)
    retries: int = Field(3, ge=0)
    backoff_s: float = Field(0.5, ge=0)
    concurrency: int = Field(4, ge=1)
    headers: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _http_url(self):
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        return self


@register("system", "http", config=HttpSystemCfg)
class HttpSystem:
    def __init__(self, run_cfg: Any, *_: Any):
        import requests

        cfg: HttpSystemCfg = run_cfg.system
        self.cfg = cfg
        self._session = requests.Session()
        self._slots = threading.BoundedSemaphore(cfg.concurrency)

    def answer(self, req: SystemRequest) -> SystemOutput:
        import requests

        body = req.as_json()
        attempt = 0
        while True:
            try:
                with self._slots:
                    resp = self._session.post(
                        self.cfg.url, json=body, headers=dict(self.cfg.headers),
                        timeout=(self.cfg.connect_timeout_s, self.cfg.read_timeout_s))
            except (requests.ConnectionError, requests.Timeout) as e:
                err: str = f"{type(e).__name__}: {e}"
                retryable = True
            else:
                if resp.status_code < 300:
                    return self._parse(resp, req.case_id)
                err = f"HTTP {resp.status_code}: {resp.text[:200]}"
                retryable = resp.status_code >= 500
            if not retryable or attempt >= self.cfg.retries:
                raise HttpSystemError(f"{err} (after {attempt + 1} attempt(s))")
            time.sleep(self.cfg.backoff_s * (2 ** attempt))
            attempt += 1

    @staticmethod
    def _parse(resp, case_id: str) -> SystemOutput:
        try:
            data = resp.json()
        except ValueError:
            raise HttpSystemError(f"malformed JSON in response: {resp.text[:120]!r}") from None
        if not isinstance(data, dict):
            raise HttpSystemError("response is not a JSON object")
        data.setdefault("case_id", case_id)
        if data["case_id"] != case_id:
            raise HttpSystemError(f"response is for case {data['case_id']!r}, not {case_id!r}")
        return SystemOutput.model_validate(data)
