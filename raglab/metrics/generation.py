"""Generation, abstention and safety metrics of one case, from its verdicts and output.

Verdicts are dicts emitted by a grader (see raglab.graders.orchestrate); every function here
is pure. ``None`` means "does not apply"; an error verdict makes its family ``None`` for the
case and the case counts in ``errors``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from raglab.data.verdicts import NuggetLabel, RelevanceLabel
from raglab.text.normalize import contains_normalized, normalize

NUGGET_WEIGHTS = {NuggetLabel.YES: 1.0, NuggetLabel.PARTIAL: 0.5, NuggetLabel.NO: 0.0}
RELEVANCE_SCORES = {RelevanceLabel.ANSWERS_AS_ASKED: 1.0, RelevanceLabel.ADDS_UNNEEDED: 0.5,
                    RelevanceLabel.DIFFERENT_QUESTION: 0.0}

REFUSAL = re.compile(
    r"\b(i\s+(do\s*n[o']?t|don't|cannot|can't|am\s+unable\s+to|am\s+not\s+able\s+to)\s+"
    r"(know|find|answer|say|help\s+with\s+that|determine|tell)"
    r"|(no|not\s+enough|insufficient)\s+information"
    r"|(cannot|can't|unable\s+to)\s+(find|answer|determine|locate)"
    r"|(isn't|is\s+not|not)\s+(mentioned|covered|stated|available)\s+in\s+the\s+"
    r"(provided|available|given)?\s*(documents|passages|context|sources)"
    r"|do\s+not\s+(contain|include|mention)\s+(the\s+)?(answer|information))",
    re.IGNORECASE)


def is_refusal_text(answer: str) -> bool:
    """Whether an answer reads as a refusal (used when no grader decomposed it)."""
    return bool(REFUSAL.search(answer or ""))


def _family(verdicts: Sequence[dict], family: str, kind: str = "claim") -> list[dict]:
    return [v for v in verdicts if v["family"] == family and v.get("kind") == kind]


def _errored(vs: Sequence[dict]) -> bool:
    return any(v.get("error") for v in vs)


def abstained(answer: str | None, verdicts: Sequence[dict]) -> bool | None:
    """An answer with no claims is an abstention. None when the system produced nothing."""
    if answer is None:
        return None
    dec = [v for v in verdicts if v.get("kind") == "decomposition"]
    if dec and not _errored(dec):
        return len(dec[0].get("claims") or []) == 0
    return is_refusal_text(answer) or not answer.strip()


def claim_metrics(verdicts: Sequence[dict], is_abstention: bool) -> dict[str, Any]:
    vs = _family(verdicts, "faithfulness")
    out: dict[str, Any] = {"faithfulness": None, "contradicted_claim_rate": None}
    if is_abstention or not vs or _errored(vs):
        return out
    n = len(vs)
    out["faithfulness"] = sum(v["label"] == "SUPPORTED" for v in vs) / n
    out["contradicted_claim_rate"] = sum(v["label"] == "CONTRADICTED" for v in vs) / n
    return out


def citation_metrics(verdicts: Sequence[dict], n_factual_sentences: int,
                     cited_sentences: set[int], has_citations: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"citation_precision": None, "citation_coverage": None}
    if not has_citations:
        return out
    vs = _family(verdicts, "citations")
    if vs and not _errored(vs):
        out["citation_precision"] = sum(v["label"] == "SUPPORTED" for v in vs) / len(vs)
    if n_factual_sentences > 0:
        out["citation_coverage"] = min(1.0, len(cited_sentences) / n_factual_sentences)
    return out


def correctness(verdicts: Sequence[dict], is_abstention: bool, answerable: bool,
                has_reference: bool) -> float | None:
    if not answerable or not has_reference or is_abstention:
        return None
    vs = _family(verdicts, "correctness")
    if not vs or _errored(vs):
        return None
    return sum(v["label"] == "SUPPORTED" for v in vs) / len(vs)


def relevance(verdicts: Sequence[dict], is_abstention: bool) -> float | None:
    vs = _family(verdicts, "relevance", "rubric")
    if is_abstention or not vs or _errored(vs):
        return None
    return RELEVANCE_SCORES[vs[0]["label"]]


def nugget_metrics(verdicts: Sequence[dict], nuggets_vital: Sequence[bool], answerable: bool,
                   is_abstention: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"vital_nugget_recall": None, "nugget_recall": None,
                           "all_vital_present": None}
    if not answerable or not nuggets_vital:
        return out
    if is_abstention:
        weights = [0.0] * len(nuggets_vital)
    else:
        vs = _family(verdicts, "nuggets", "nugget")
        if len(vs) != len(nuggets_vital) or _errored(vs):
            return out
        weights = [NUGGET_WEIGHTS[v["label"]] for v in sorted(vs, key=lambda v: v["index"])]
    vital = [w for w, is_v in zip(weights, nuggets_vital) if is_v]
    out["nugget_recall"] = sum(weights) / len(weights)
    if vital:
        out["vital_nugget_recall"] = sum(vital) / len(vital)
        out["all_vital_present"] = 1.0 if all(w == 1.0 for w in vital) else 0.0
    return out


def abstention_metrics(is_abstention: bool | None, answerable: bool) -> dict[str, Any]:
    """False refusal over answerable cases, false answer over unanswerable ones (a pair)."""
    if is_abstention is None:
        return {"false_refusal_rate": None, "false_answer_rate": None}
    if answerable:
        return {"false_refusal_rate": 1.0 if is_abstention else 0.0, "false_answer_rate": None}
    return {"false_refusal_rate": None, "false_answer_rate": 0.0 if is_abstention else 1.0}


def must_not_contain(answer: str | None, forbidden: Sequence[str]) -> float | None:
    if answer is None or not forbidden:
        return None
    a = normalize(answer)
    raw = answer.casefold()
    for s in forbidden:
        n = normalize(s)
        # on token boundaries after normalisation ("20th" is not in "120th"); a string with
        # no word characters at all is matched as it is
        if contains_normalized(a, n) if n else (s.strip() and s.casefold() in raw):
            return 1.0
    return 0.0
