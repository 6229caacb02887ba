"""Which config keys hold secrets: one rule for config.yaml, MLflow params and reports.

A key is secret when its last word (split at ``_ - .``, spaces and camelCase) is one of
SECRET_WORDS: ``api_key``, ``X-Api-Key``, ``accessToken``, ``client_secret``, ``password``,
``Authorization`` are; ``max_tokens``, ``context_token_budget``, ``keyword`` are not.
"""

from __future__ import annotations

import re
from typing import Any

SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "secrets", "password",
                          "passwd", "authorization", "cookie", "credentials"})
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SPLIT = re.compile(r"[^a-z0-9]+")


def is_secret_key(key: Any) -> bool:
    words = [w for w in _SPLIT.split(_CAMEL.sub(r"\1_\2", str(key)).lower()) if w]
    return bool(words) and words[-1] in SECRET_WORDS


def redact(obj: Any) -> Any:
    """A copy with the values of secret keys replaced by ``***`` (for files, params, logs)."""
    if isinstance(obj, dict):
        return {k: ("***" if is_secret_key(k) and v not in (None, "", {})
                    and not isinstance(v, (dict, list)) else redact(v))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj
