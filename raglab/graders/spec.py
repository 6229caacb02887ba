"""Grader specs and metric-family versions.

A metric family's version is a short hash of everything that can change its values: the
grader's backend, model, sampling parameters, the prompt texts the family uses, the claim
decomposition settings, the verification mode, the output schema and parser version, and
raglab's own metric code version for that family. Runs whose versions differ are not
compared unless the user overrides it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from raglab.metrics.versions import CODE_VERSIONS, FAMILIES

PARSER_VERSION = 1

# Which prompt templates (by file stem) each family's verdicts depend on.
FAMILY_PROMPTS = {
    "faithfulness": ("decompose", "verify"),
    "citations": ("verify",),
    "correctness": ("decompose", "verify"),
    "relevance": ("relevance",),
    "nuggets": ("nuggets",),
    "abstention": ("decompose",),
}


def short_hash(obj: Any, n: int = 12) -> str:
    blob = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:n]


def family_versions(grader_cfg: Any, prompts: dict[str, str], metrics_cfg: Any) -> dict[str, str]:
    """``{family: version}`` for every metric family (README "Graders")."""
    spec = grader_cfg.model_dump()
    spec.pop("concurrency", None)  # how fast, not what: never part of a version
    spec.pop("timeout_s", None)
    spec.pop("max_retries", None)
    spec.pop("batch_poll_s", None)
    spec.pop("prices", None)
    spec.pop("mode", None)  # batch and online send the same requests
    spec.pop("prompts", None)  # the texts themselves are hashed below
    out: dict[str, str] = {
        "retrieval": short_hash(["retrieval", CODE_VERSIONS["retrieval"],
                                 metrics_cfg.straddle_min_fraction, metrics_cfg.fuzzy_threshold])
    }
    for fam in FAMILIES:
        if fam == "retrieval":
            continue
        texts = {p: prompts.get(p, "") for p in FAMILY_PROMPTS[fam]}
        out[fam] = short_hash([fam, CODE_VERSIONS[fam], PARSER_VERSION, spec, texts])
    return out


def diagnosis_version(diagnosis_cfg: Any) -> str:
    """The ``diagnosis`` entry of ``metric_versions``: raglab's diagnosis code version and
    the thresholds of the ``diagnosis`` config section (raglab.metrics.diagnosis)."""
    return short_hash(["diagnosis", CODE_VERSIONS["diagnosis"], diagnosis_cfg.model_dump()])


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
