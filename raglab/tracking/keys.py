"""MLflow key rules (pure: no mlflow import).

Metric keys
-----------
MLflow accepts a metric or param key only when every character is a letter, a digit, ``_``,
``-``, ``.``, ``:``, ``/`` or a space (Python's ``\\w`` class, so non-ASCII letters such as
``é`` are letters too; this is MLflow's own check), and when the key is a normalised relative
path (no leading or trailing ``/``, no ``//``, no ``.`` or ``..`` segment), at most 250
characters long. :func:`metric_key` maps a raglab metric name to such a key by one rule:

* ``@`` becomes ``_at_`` (``candidate.ndcg@10`` -> ``candidate.ndcg_at_10``);
* any other illegal character becomes ``_`` (``a=b`` -> ``a_b``).

The mapping is lossy only for characters raglab's metric names never use.

Slice keys
----------
A slice metric is logged as ``slice/TAG_KEY/TAG_VALUE/METRIC`` where ``METRIC`` is
``metric_key(name)`` (or ``n``, the slice size). Tag keys and values are free text, so they
are escaped with ``_`` as the escape character, using legal characters only:

=========================  ===========================================================
text                       escaped as
=========================  ===========================================================
``_``                      ``__``
``/``                      ``_s``
any other illegal char c   ``_xHH`` / ``_uHHHH`` / ``_UHHHHHHHH`` (code point of c in
                           lower-case hex, like Python's string escapes: ``%`` -> ``_x25``)
the empty string           ``_e``
``.`` or ``..`` (whole)    ``_d`` per dot (``_d``, ``_d_d``)
=========================  ===========================================================

Every other character (letters, digits, ``-``, ``.``, ``:``, space) is kept, so ordinary
values stay readable (``intent=billing`` -> ``slice/intent/billing/faithfulness``). An
escaped segment never contains ``/`` and is never empty, ``.`` or ``..``, so
:func:`parse_slice_key` splits on the first three ``/`` and inverts the escape exactly:
``parse_slice_key(slice_metric_key(k, v, m)) == (k, v, metric_key(m))``.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from raglab.secrets import is_secret_key

log = logging.getLogger(__name__)

MAX_KEY_LENGTH = 250  # MLflow's limit for metric, param and tag keys
MAX_PARAM_VALUE_LENGTH = 6000  # MLflow's limit for a param value
SLICE_PREFIX = "slice"
SLICE_SIZE = "n"  # slice/K/V/n is the number of cases in the slice

_LEGAL_CHAR = re.compile(r"[\w.\- :/]")

__all__ = [
    "MAX_KEY_LENGTH", "MAX_PARAM_VALUE_LENGTH", "SLICE_PREFIX", "SLICE_SIZE",
    "metric_key", "slice_metric_key", "parse_slice_key", "escape_segment",
    "unescape_segment", "is_legal_key", "is_secret_key", "flatten_config",
    "metrics_from_summary",
    "ppi_metrics",
]


def _legal(ch: str) -> bool:
    return bool(_LEGAL_CHAR.fullmatch(ch))


def metric_key(name: str) -> str:
    """A raglab metric name as a legal MLflow key (``@`` -> ``_at_``, other illegal -> ``_``)."""
    return "".join(ch if _legal(ch) else ("_at_" if ch == "@" else "_") for ch in str(name))


def is_legal_key(key: str) -> bool:
    """True when MLflow accepts ``key`` as a metric/param key (characters, path form, length)."""
    if not key or len(key) > MAX_KEY_LENGTH or not all(_legal(ch) for ch in key):
        return False
    parts = key.split("/")
    return all(p not in ("", ".", "..") for p in parts)


def escape_segment(text: str) -> str:
    """Escape a tag key or value into one legal, ``/``-free path segment (see module doc)."""
    text = str(text)
    if text == "":
        return "_e"
    if text in (".", ".."):
        return "_d" * len(text)
    out = []
    for ch in text:
        if ch == "_":
            out.append("__")
        elif ch == "/":
            out.append("_s")
        elif _legal(ch):
            out.append(ch)
        else:
            cp = ord(ch)
            if cp <= 0xFF:
                out.append(f"_x{cp:02x}")
            elif cp <= 0xFFFF:
                out.append(f"_u{cp:04x}")
            else:
                out.append(f"_U{cp:08x}")
    return "".join(out)


_HEX_WIDTH = {"x": 2, "u": 4, "U": 8}
_HEX = set("0123456789abcdefABCDEF")


def unescape_segment(seg: str) -> str:
    """Inverse of :func:`escape_segment`; raises ValueError on a malformed segment."""
    out = []
    i, n = 0, len(seg)
    while i < n:
        ch = seg[i]
        if ch == "/":
            raise ValueError(f"unescaped '/' in slice segment {seg!r}")
        if ch != "_":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= n:
            raise ValueError(f"dangling '_' escape in slice segment {seg!r}")
        code = seg[i + 1]
        if code == "_":
            out.append("_")
            i += 2
        elif code == "s":
            out.append("/")
            i += 2
        elif code == "d":
            out.append(".")
            i += 2
        elif code == "e":
            i += 2
        elif code in _HEX_WIDTH:
            width = _HEX_WIDTH[code]
            digits = seg[i + 2:i + 2 + width]
            if len(digits) != width or not set(digits) <= _HEX:
                raise ValueError(f"bad '_{code}' escape in slice segment {seg!r}")
            out.append(chr(int(digits, 16)))
            i += 2 + width
        else:
            raise ValueError(f"unknown escape '_{code}' in slice segment {seg!r}")
    return "".join(out)


def slice_metric_key(tag_key: Any, tag_value: Any, metric: str) -> str:
    """``slice/TAG_KEY/TAG_VALUE/METRIC`` with key and value escaped, metric via metric_key."""
    return "/".join((SLICE_PREFIX, escape_segment(str(tag_key)), escape_segment(str(tag_value)),
                     metric_key(metric)))


def parse_slice_key(key: str) -> tuple[str, str, str]:
    """``slice/K/V/METRIC`` -> (tag_key, tag_value, metric_key); ValueError if not a slice key."""
    parts = key.split("/", 3)
    if len(parts) != 4 or parts[0] != SLICE_PREFIX or not parts[3]:
        raise ValueError(f"not a slice metric key: {key!r}")
    return unescape_segment(parts[1]), unescape_segment(parts[2]), parts[3]


def _scrub(obj: Any) -> Any:
    """Drop secret-looking entries from dicts nested anywhere (for JSON-encoded lists)."""
    if isinstance(obj, Mapping):
        return {str(k): _scrub(v) for k, v in obj.items() if not is_secret_key(str(k))}
    if _is_list(obj):
        return [_scrub(v) for v in obj]
    return obj


def _is_list(obj: Any) -> bool:
    return isinstance(obj, Sequence) and not isinstance(obj, (str, bytes, bytearray))


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def flatten_config(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Flatten a nested config to ``{"a.b.c": "value"}`` for MLflow params.

    Dict keys are joined with ``.``; lists become JSON strings; ``None`` -> ``null``,
    booleans -> ``true``/``false``; an empty dict becomes ``{}``. Any entry whose key (at any
    level) is a secret by :func:`raglab.secrets.is_secret_key` is dropped,
    also inside lists. Keys are returned as given (map them with :func:`metric_key` to log).
    """
    out: dict[str, str] = {}
    for k, v in cfg.items():
        k = str(k)
        if is_secret_key(k):
            continue
        full = f"{prefix}.{k}" if prefix else k
        if isinstance(v, Mapping):
            if v:
                out.update(flatten_config(v, full))
            else:
                out[full] = "{}"
        elif _is_list(v):
            out[full] = json.dumps(_scrub(v), ensure_ascii=False, default=str)
        else:
            out[full] = _scalar(v)
    return out


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, str):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if not math.isnan(f) else None


#: the figures of a prediction-powered estimate logged to MLflow (``ppi.<metric>.<figure>``,
#: and ``slice/TAG_KEY/TAG_VALUE/ppi.<metric>.<figure>`` per slice)
PPI_FIGURES = ("estimate", "ci_low", "ci_high", "judge_mean", "n_labelled", "n_effective",
               "lam")


def ppi_metrics(section: Mapping[str, Any]) -> dict[str, float]:
    """The MLflow metrics of ``metrics.json``'s ``ppi`` section (``raglab label``): each
    labelled metric's human-scale figures overall and per slice (finite numbers only)."""
    out: dict[str, float] = {}

    def add(keys: Mapping[str, str], est: Mapping[str, Any] | None) -> None:
        for figure, key in keys.items():
            v = _number((est or {}).get(figure))
            if v is not None:
                out[key] = v

    for metric, entry in (section.get("metrics") or {}).items():
        add({f: f"ppi.{metric_key(metric)}.{f}" for f in PPI_FIGURES}, entry.get("overall"))
        for key, values in (entry.get("slices") or {}).items():
            for value, est in (values or {}).items():
                add({f: slice_metric_key(key, value, f"ppi.{metric}.{f}")
                     for f in PPI_FIGURES}, est)
    return out


def metrics_from_summary(summary: Mapping[str, Any],
                         slice_names: set[str] | None = None) -> dict[str, float]:
    """The MLflow metrics ``{key: value}`` of a metrics.json object (nulls and NaN dropped).

    ``slice_names``: log only these metrics (and the slice size) per slice; None: all.
    Diagnosis counts (``metrics.json`` ``diagnoses``) are logged as ``diagnosis.CAUSE`` (cases
    with that cause), ``diagnosis.primary.CAUSE``, ``diagnosis.failed`` and, per slice,
    ``slice/TAG_KEY/TAG_VALUE/diagnosis.CAUSE``."""
    out: dict[str, float] = {}

    def put(key: str, value: Any, what: str) -> None:
        v = _number(value)
        if v is None:
            return
        if not is_legal_key(key):
            log.warning("metric %s skipped (key %r illegal or over %d chars)",
                        what, key, MAX_KEY_LENGTH)
        elif key in out:
            log.warning("metric %s skipped (key %r already used)", what, key)
        else:
            out[key] = v

    for name, value in (summary.get("overall") or {}).items():
        put(metric_key(name), value, name)
    for tag_key, values in (summary.get("slices") or {}).items():
        for tag_value, mets in (values or {}).items():
            for name, value in (mets or {}).items():
                if slice_names is not None and name != SLICE_SIZE and name not in slice_names:
                    continue
                put(slice_metric_key(tag_key, tag_value, name), value,
                    f"{name} of slice {tag_key}={tag_value}")
    diag = summary.get("diagnoses") or {}
    for cause, n in (diag.get("overall") or {}).items():
        put(metric_key(f"diagnosis.{cause}"), n, f"diagnosis.{cause}")
    for cause, n in (diag.get("primary") or {}).items():
        put(metric_key(f"diagnosis.primary.{cause}"), n, f"diagnosis.primary.{cause}")
    if "failed" in diag:
        put("diagnosis.failed", diag["failed"], "diagnosis.failed")
    for tag_key, values in (diag.get("slices") or {}).items():
        for tag_value, counts in (values or {}).items():
            for cause, n in (counts or {}).items():
                put(slice_metric_key(tag_key, tag_value, f"diagnosis.{cause}"), n,
                    f"diagnosis.{cause} of slice {tag_key}={tag_value}")
    for key, value in ppi_metrics(summary.get("ppi") or {}).items():
        put(key, value, key)
    for name in ("n_cases", "n_quarantined", "errors"):
        put(name, summary.get(name), name)
    for name, value in (summary.get("work") or {}).items():
        put(metric_key(f"work.{name}"), value, f"work.{name}")
    return out
