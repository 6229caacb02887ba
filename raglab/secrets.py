"""Secrets: which config values are secret, and scrubbing known secret values from text.

Two rules, applied to every string raglab writes or prints:

1. :func:`redact` (by position): the value of a key whose last word (split at ``_ - .``,
   spaces and camelCase) is one of SECRET_WORDS (``api_key``, ``X-Api-Key``,
   ``accessToken``, ``client_secret``, ``password``, ``Authorization``; not ``max_tokens``,
   ``context_token_budget``, ``keyword``, nor a key naming a field: ``doc_id_key``,
   ``sort_key``: FIELD_KEY_WORDS); a value under a ``headers`` mapping when
   :func:`header_secrets` finds one in it (a secret-looking header name, or a value that
   looks random: see :func:`looks_random`); the password of a URL
   (``https://user:pw@host``; a user name alone when it looks random, a token) and its
   secret-looking query parameters (``?api_key=``,
   ``?token=``, ``?sig=``). An ordinary header value (``X-Tenant: case``,
   ``Accept-Language: en``) is no secret: it is neither hidden nor scrubbed.
2. :class:`Scrubber` (by value): every value found by rule 1, every value a configuration
   read from the environment (``${oc.env:MY_TOKEN}``), the values of environment
   variables whose name is secret (``ANTHROPIC_API_KEY``, ``MY_TOKEN``) and the URL
   credentials in any environment variable (``OPENAI_BASE_URL=http://user:pw@host/v1``,
   with the ``Basic`` value an HTTP client makes of them) are replaced by
   ``***`` wherever they appear as values: records (a system's error page echoing its
   request headers), the stage cache, error messages, run names, MLflow params and tags,
   traces and their assessments, files and both output streams. Text is scrubbed before it
   is cut for display (:func:`clip`, :func:`clip_line`), never after. JSON documents are
   scrubbed string value by string value (:meth:`Scrubber.scrub_obj`): a key is never
   changed, so a secret that happens to be part of a field name cannot wreck a record. The
   process-wide scrubber is :data:`SCRUBBER`; :func:`scrub` applies it.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import threading
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "secrets", "password",
                          "passwd", "authorization", "cookie", "credentials"})
#: a key whose last word is ``key`` after one of these names a field or a lookup key
#: (``doc_id_key: doc_id``, ``text_key``, ``sort_key``), not a credential: its value is no
#: secret (else every record holding that field name would be scrubbed value by value)
FIELD_KEY_WORDS = frozenset({"id", "field", "column", "attribute", "metadata", "text",
                             "content", "sort"})
#: query parameters that carry a credential though their name is no secret word
SECRET_QUERY = frozenset({"auth", "sig", "signature", "access_token", "code", "pwd"})
#: environment variables read through ${oc.env:...} that are never secret (paths)
PLAIN_ENV = frozenset({"HOME", "USER", "LOGNAME", "PWD", "TMPDIR", "TMP", "TEMP", "SHELL"})
REDACTED = "***"
MIN_SECRET_LENGTH = 4  # shorter values would scrub ordinary words
#: words of a header name that make its value a secret (any word of the name, so
#: ``X-Auth-User`` and ``Authentication`` count as well as ``X-Api-Key``)
SECRET_HEADER_WORDS = SECRET_WORDS | frozenset({
    "auth", "authentication", "authn", "session", "sessionid", "sid", "signature", "sig",
    "credential", "apikey", "jwt", "bearer", "csrf", "xsrf"})
#: a header value under an ordinary name is a secret when it looks random: at least this
#: many characters, at least this Shannon entropy per character, no whitespace, and at
#: least two of lower case letters, upper case letters and digits (``case``, ``en``,
#: ``acme-prod``, ``application/json``, ``no-cache`` are not; ``sk-live-4f9aQ2...``, a hex
#: digest or a UUID are)
RANDOM_MIN_LENGTH = 16
RANDOM_MIN_ENTROPY = 3.0
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SPLIT = re.compile(r"[^a-z0-9]+")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_ENV = re.compile(r"\$\{oc\.env:([^,}]+)")


def is_secret_key(key: Any) -> bool:
    words = [w for w in _SPLIT.split(_CAMEL.sub(r"\1_\2", str(key)).lower()) if w]
    if len(words) > 1 and words[-1] == "key" and words[-2] in FIELD_KEY_WORDS:
        return False  # names a field (doc_id_key: doc_id), not a credential
    return bool(words) and words[-1] in SECRET_WORDS


def is_secret_header(name: Any) -> bool:
    """Whether a header's name says its value is a credential (``Authorization``,
    ``X-Api-Key``, ``Cookie``, ``X-Auth``, ``Proxy-Authorization``, ``X-Session-Id``)."""
    words = [w for w in _SPLIT.split(_CAMEL.sub(r"\1_\2", str(name)).lower()) if w]
    return is_secret_key(name) or any(w in SECRET_HEADER_WORDS for w in words)


def entropy(text: str) -> float:
    """Shannon entropy of ``text``'s characters, in bits per character."""
    n = len(text)
    if not n:
        return 0.0
    counts: dict[str, int] = {}
    for c in text:
        counts[c] = counts.get(c, 0) + 1
    return -sum(k / n * math.log2(k / n) for k in counts.values())


def looks_random(value: str) -> bool:
    """Whether ``value`` looks like a generated credential rather than a word or a name
    (the rule of :data:`RANDOM_MIN_LENGTH` and :data:`RANDOM_MIN_ENTROPY`)."""
    if len(value) < RANDOM_MIN_LENGTH or any(c.isspace() for c in value):
        return False
    classes = (any(c.islower() for c in value) + any(c.isupper() for c in value)
               + any(c.isdigit() for c in value))
    return classes >= 2 and entropy(value) >= RANDOM_MIN_ENTROPY


def header_secrets(name: Any, value: Any) -> set[str]:
    """The secrets in one header: the whole value (and the token of ``Bearer TOKEN``) under
    a secret-looking name; otherwise the value, or each word of it, that looks random.
    Empty for an ordinary header (``X-Tenant: case``)."""
    if value is None or isinstance(value, (bool, dict, list)):
        return set()
    text = str(value)
    if is_secret_header(name):
        return {text, *text.split()[1:2]}
    return {w for w in {text, *text.split()} if looks_random(w)}


def _secret_query(name: str) -> bool:
    return is_secret_key(name) or name.lower() in SECRET_QUERY


def url_secrets(text: str) -> list[str]:
    """The credentials in the URLs of ``text``: the userinfo (a password, with the
    ``user:password`` pair and the ``Authorization: Basic`` value an HTTP client sends for
    it; a user name alone when it looks random, as a token given as the user), and secret
    query values."""
    import base64

    out: list[str] = []
    for m in _URL.finditer(text):
        try:
            parts = urlsplit(m.group(0))
            if parts.password:
                for user, pw in {(parts.username or "", parts.password),
                                 (unquote(parts.username or ""), unquote(parts.password))}:
                    pair = f"{user}:{pw}"
                    out += [pw, pair, base64.b64encode(pair.encode()).decode("ascii")]
            elif parts.username and looks_random(unquote(parts.username)):
                out += [parts.username, unquote(parts.username)]
            out += [v for k, v in parse_qsl(parts.query, keep_blank_values=False)
                    if _secret_query(k)]
        except ValueError:
            continue
    return out


def redact_url(text: str) -> str:
    """``text`` with URL passwords and secret query values replaced by ``***``."""
    def one(m: re.Match) -> str:
        url = m.group(0)
        try:
            parts = urlsplit(url)
            netloc = parts.netloc
            if parts.password is not None:
                user = parts.username or ""
                host = netloc.rsplit("@", 1)[1]
                netloc = f"{user}:{REDACTED}@{host}"
            elif parts.username and looks_random(unquote(parts.username)):
                netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"  # a token as the user
            query = parts.query
            if query:
                pairs = parse_qsl(query, keep_blank_values=True)
                if any(_secret_query(k) for k, _ in pairs):
                    query = "&".join(f"{quote(k)}={REDACTED if _secret_query(k) else quote(v)}"
                                     for k, v in pairs)
            if netloc == parts.netloc and query == parts.query:
                return url
            return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
        except ValueError:
            return url
    return _URL.sub(one, text)


def redact(obj: Any, _in_headers: bool = False) -> Any:
    """A copy with secret values replaced by ``***`` (rule 1 above)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if v in (None, "", {}) or isinstance(v, (dict, list)):
                secret = False
            elif _in_headers:
                secret = bool(header_secrets(k, v))
            else:
                secret = is_secret_key(k)
            if secret:
                out[k] = REDACTED
            else:
                out[k] = redact(v, _in_headers or str(k).lower() == "headers")
        return out
    if isinstance(obj, list):
        return [redact(v, _in_headers) for v in obj]
    if isinstance(obj, str):
        return redact_url(obj)
    return obj


def secret_values(resolved: Any, unresolved: Any = None) -> set[str]:
    """The secret values of a configuration: those :func:`redact` hides (with the token
    of an ``Authorization: Bearer TOKEN``), URL credentials, and every value read from a
    secret-looking environment variable through ``${oc.env:...}`` (``unresolved``: the
    same configuration before interpolation)."""
    found: set[str] = set()

    def walk(node: Any, raw: Any, secret: bool, in_headers: bool) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if in_headers and not secret and not isinstance(v, (dict, list)):
                    found.update(header_secrets(k, v))
                walk(v, raw.get(k) if isinstance(raw, dict) else None,
                     secret or is_secret_key(k),
                     in_headers or str(k).lower() == "headers")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, raw[i] if isinstance(raw, list) and i < len(raw) else None,
                     secret, in_headers)
        elif node is not None and not isinstance(node, bool):
            text = str(node)
            if secret:
                found.add(text)
                found.update(text.split()[1:2])  # "Bearer TOKEN" -> TOKEN as well
            found.update(url_secrets(text))
            if isinstance(raw, str) and any(name not in PLAIN_ENV
                                            for name in _ENV.findall(raw)):
                found.add(text)

    walk(resolved, unresolved, False, False)
    return {v for v in found if len(v) >= MIN_SECRET_LENGTH and v != REDACTED}


def override_secrets(overrides: list[str]) -> set[str]:
    """Secret values given on the command line (``+system.headers.X=V``, ``a.api_key=V``,
    a URL with credentials), known before any configuration is composed."""
    found: set[str] = set()
    for o in overrides:
        key, sep, value = o.partition("=")
        if not sep:
            continue
        value = value.strip().strip("'\"")
        parts = key.lstrip("+~").split(".")
        if "headers" in (p.lower() for p in parts[:-1]):
            found.update(header_secrets(parts[-1], value))
        elif is_secret_key(parts[-1]):
            found.add(value)
            found.update(value.split()[1:2])
        found.update(url_secrets(value))
    return {v for v in found if len(v) >= MIN_SECRET_LENGTH and v != REDACTED}


def environment_secrets(environ: dict[str, str] | None = None) -> set[str]:
    """Values of environment variables whose name is secret (``ANTHROPIC_API_KEY``), and
    the credentials of a URL in any variable (``OPENAI_BASE_URL=http://user:pw@host/v1``,
    ``HTTPS_PROXY``: :func:`url_secrets`), which an SDK sends as Basic authentication."""
    env = os.environ if environ is None else environ
    found = {v for k, v in env.items() if is_secret_key(k)}
    for v in env.values():
        if "://" in v and ("@" in v or "?" in v):
            found.update(url_secrets(v))
    return {v for v in found if len(v) >= MIN_SECRET_LENGTH and v != REDACTED}


class Scrubber:
    """Replaces every known secret value (and its JSON-escaped forms) by ``***``."""

    def __init__(self, values: set[str] | None = None, environment: bool = True):
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._pattern: re.Pattern | None = None
        self._environment = environment
        self._env_loaded = False
        if values:
            self.add(values)

    def add(self, values: Any) -> None:
        forms: set[str] = set()
        for v in values:
            if not isinstance(v, str) or len(v) < MIN_SECRET_LENGTH:
                continue
            forms.add(v)
            forms.add(json.dumps(v)[1:-1])
            forms.add(json.dumps(v, ensure_ascii=False)[1:-1])
            forms.add(quote(v, safe=""))
        with self._lock:
            new = forms - self._values
            if new:  # a new set (not updated in place): a reader may be iterating the old
                self._values = self._values | new
                self._pattern = None

    def _compiled(self) -> re.Pattern | None:
        if self._environment and not self._env_loaded:
            self._env_loaded = True
            self.add(environment_secrets())
        with self._lock:
            if self._pattern is None and self._values:
                alts = sorted(self._values, key=len, reverse=True)
                self._pattern = re.compile("|".join(re.escape(v) for v in alts))
            return self._pattern

    @property
    def values(self) -> frozenset[str]:
        self._compiled()
        return frozenset(self._values)

    def scrub(self, text: str) -> str:
        pat = self._compiled()
        if pat is None or not isinstance(text, str):
            return text
        return pat.sub(REDACTED, text)

    def found_in(self, data: bytes) -> bool:
        """Whether any known secret value occurs in UTF-8 ``data``."""
        if self._compiled() is None:  # no secret known: nothing to decode
            return False
        return self.found_in_text(data.decode("utf-8", "replace"))

    def found_in_text(self, text: str) -> bool:
        """Whether any known secret value occurs in ``text``: each of its forms looked for
        as a substring (one pattern of many alternatives, as :meth:`scrub` uses, tries each
        at every position: ten times slower on a record line with a few secrets)."""
        if self._compiled() is None:
            return False
        return any(v in text for v in self._values)

    def scrub_bytes(self, data: bytes) -> bytes:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        out = self.scrub(text)
        return data if out == text else out.encode("utf-8")

    def scrub_obj(self, obj: Any, numbers: bool = True) -> Any:
        """A copy of a JSON-like value with every string value scrubbed (keys are left as
        they are: they are field names, raglab's or a system's, not values), and, with
        ``numbers``, every number that *is* a known secret (a digits-only token a system
        echoed back as a JSON number) replaced by ``***``; a number that only contains one
        is left alone (a metric's digits are not a secret). ``numbers=False`` for raglab's
        own figures (counts in metrics.json), which no system wrote."""
        if self._compiled() is None:
            return obj
        if isinstance(obj, str):
            return self.scrub(obj)
        if isinstance(obj, (int, float)) and not isinstance(obj, bool):
            return REDACTED if numbers and (str(obj) in self._values
                                            or repr(obj) in self._values) else obj
        if isinstance(obj, dict):
            return {k: self.scrub_obj(v, numbers) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.scrub_obj(v, numbers) for v in obj]
        return obj


#: the process-wide scrubber (the environment's secrets, plus those a run registers)
SCRUBBER = Scrubber()


def scrub(text: str) -> str:
    return SCRUBBER.scrub(text)


def clip(text: str, limit: int) -> str:
    """``text`` scrubbed of known secrets, then cut to ``limit`` characters (cutting first
    could keep part of a secret that scrubbing no longer recognises)."""
    return SCRUBBER.scrub(text)[:limit]


def clip_line(value: Any, limit: int) -> str:
    """``value``'s text (an exception's, a model's, a file's) on one line, scrubbed of known
    secrets, then cut to ``limit`` characters: the one way raglab shortens text for
    display (:func:`clip`)."""
    return clip(" ".join(str(value).split()), limit)


def clip_bytes(data: bytes, limit: int) -> str:
    """The start of UTF-8 ``data`` (a response body of any size), scrubbed, then cut to
    ``limit`` characters. Only a prefix is decoded and scrubbed, one long enough that a
    secret the prefix cuts in two lies wholly beyond ``limit`` once scrubbed."""
    longest = max((len(v) for v in SCRUBBER.values), default=0)
    size = 4 * (limit + longest) + 64
    while True:
        text = SCRUBBER.scrub(data[:size].decode("utf-8", "replace"))
        if size >= len(data) or len(text) >= limit + longest:
            return text[:limit]
        size *= 4


def scrub_obj(obj: Any) -> Any:
    return SCRUBBER.scrub_obj(obj)


def register(values: Any) -> None:
    """Make ``values`` known secrets for the rest of the process."""
    SCRUBBER.add(values)


class ScrubbingStream(io.TextIOBase):
    """A text stream that scrubs what is written to it before passing it on."""

    def __init__(self, inner: Any, scrubber: Scrubber = SCRUBBER):
        self._inner = inner
        self._scrubber = scrubber

    def write(self, s: str) -> int:
        self._inner.write(self._scrubber.scrub(s))
        return len(s)

    def flush(self) -> None:
        self._inner.flush()

    def isatty(self) -> bool:
        return bool(getattr(self._inner, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self._inner.fileno()

    @property
    def encoding(self):
        return getattr(self._inner, "encoding", "utf-8")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def scrub_output_streams() -> None:
    """Scrub known secrets from everything written to stdout and stderr from now on."""
    import sys

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, ScrubbingStream):
            setattr(sys, name, ScrubbingStream(stream))
