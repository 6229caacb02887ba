"""Grader specs and metric-family versions.

A metric family's version is a short hash of everything that can change its values: the
grader's backend (its name), model, sampling parameters, the prompt texts the family uses, the claim
decomposition settings, the verification mode, the output schema and parser version, and
raglab's own metric code version for that family; never where the judge is served
(``base_url``) or a key. Runs whose versions differ are not
compared unless the user overrides it.
"""

from __future__ import annotations

from typing import Any

from raglab.cache import content_key
from raglab.metrics.versions import CODE_VERSIONS, FAMILIES, GRADED_FAMILIES

PARSER_VERSION = 1

# Which prompt templates (by file stem) each graded family's verdicts depend on (the graded
# families come from the metric declarations: raglab.metrics.catalog.GRADED_FAMILIES).
FAMILY_PROMPTS = {
    "faithfulness": ("decompose", "verify"),
    "citations": ("verify",),
    "correctness": ("decompose", "verify"),
    "relevance": ("relevance",),
    "nuggets": ("nuggets",),
    "abstention": ("decompose",),
}
assert set(FAMILY_PROMPTS) == set(GRADED_FAMILIES), "a graded family without its prompts"


def grouped_prompts(grader_cfg: Any, prompts: dict[str, str]) -> set[str]:
    """The grouped prompts a grader uses (``verification: batched``, the template present)."""
    from raglab.graders.grouped import GROUP_FAMILIES

    if getattr(grader_cfg, "verification", None) != "batched":
        return set()
    return {g for g in GROUP_FAMILIES if g in prompts}


def family_prompt_texts(family: str, prompts: dict[str, str],
                        grouped: set[str] | frozenset[str]) -> dict[str, str]:
    """The prompt texts a family's verdicts depend on (grouped ones only when used, so a
    grader without them keeps the versions it had)."""
    from raglab.graders.grouped import family_groups

    texts = {p: prompts.get(p, "") for p in FAMILY_PROMPTS[family]}
    for g in family_groups(family, grouped):
        texts[g] = prompts[g]
    return texts


def family_versions(grader_cfg: Any, prompts: dict[str, str], metrics_cfg: Any) -> dict[str, str]:
    """``{family: version}`` for every metric family (docs/graders.md)."""
    spec = grader_cfg.model_dump()
    spec.pop("concurrency", None)  # how fast, not what: never part of a version
    spec.pop("timeout_s", None)
    spec.pop("max_retries", None)
    spec.pop("batch_poll_s", None)
    spec.pop("prices", None)
    spec.pop("mode", None)  # batch and online send the same requests
    spec.pop("repeats", None)  # how many samples of the same grader, not which grader
    spec.pop("prompts", None)  # the texts themselves are hashed below
    spec.pop("base_url", None)  # where a judge is served, not which judge
    spec.pop("token_limit", None)  # the request field carrying max_tokens, not its value
    spec.pop("max_body_bytes", None)  # how large an answer may be read, not what it says
    grouped = grouped_prompts(grader_cfg, prompts)
    rules = _rules_versions(grader_cfg)
    out: dict[str, str] = {}
    for fam in FAMILIES:
        if fam not in GRADED_FAMILIES:  # computed by rules: their settings, no grader
            out[fam] = content_key(fam, CODE_VERSIONS[fam], metrics_cfg.straddle_min_fraction,
                                   metrics_cfg.fuzzy_threshold, length=12)
            continue
        texts = family_prompt_texts(fam, prompts, grouped)
        extra = ("rules", rules[fam]) if fam in rules else ()
        out[fam] = content_key(fam, CODE_VERSIONS[fam], PARSER_VERSION, spec, texts, *extra,
                               length=12)
    return out


def _rules_versions(grader_cfg: Any) -> dict[str, int]:
    """The grader's ``rules_versions`` (raglab.components.Grader), if it has any."""
    from raglab.registry import entry

    name = getattr(grader_cfg, "name", None)
    if not isinstance(name, str):
        return {}
    return dict(getattr(entry("grader", name).factory, "rules_versions", None) or {})


def diagnosis_version(diagnosis_cfg: Any) -> str:
    """The ``diagnosis`` entry of ``metric_versions``: raglab's diagnosis code version and
    the thresholds of the ``diagnosis`` config section (raglab.metrics.diagnosis)."""
    return content_key("diagnosis", CODE_VERSIONS["diagnosis"], diagnosis_cfg.model_dump(),
                       length=12)
