"""The offline, deterministic grader (no model, no key).

What it does, and its limits (also in the README):
- claims: the answer's sentences (and ';'-separated clauses), with citation markers,
  greetings, hedges and refusal sentences dropped. Pronouns are NOT resolved.
- verification: each claim is aligned with the context sentence covering most of its
  content terms (light stemming; rapidfuzz token ratio breaks ties). Covered at
  ``support_threshold`` or above: SUPPORTED, unless a number, a negation or a capitalised
  entity of the claim disagrees with that sentence (CONTRADICTED). Partly covered with such
  a disagreement: CONTRADICTED. Otherwise NOT_FOUND. Paraphrases with other words are
  missed (NOT_FOUND), and contradictions that need world knowledge are missed.
- nuggets: term coverage of the nugget by the answer (YES / PARTIAL / NO thresholds); a
  number of the nugget missing from the answer caps it at PARTIAL.
- relevance: how much of the question the answer covers, and how many of its sentences
  touch the question at all.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field
from rapidfuzz import fuzz

from raglab.config import DecompositionCfg
from raglab.data.schema import Strict
from raglab.registry import register
from raglab.text.normalize import normalize
from raglab.metrics.generation import is_refusal_text
from raglab.text.lexical import NUMBER, content_terms
from raglab.text.sentences import split_sentences, strip_citations

_HEDGE_PREFIX = re.compile(
    r"^(i think|i believe|it seems( that)?|it appears( that)?|probably|perhaps|maybe|"
    r"in short|overall|basically|to summari[sz]e|based on the (documents|passages|context)),?\s+",
    re.I)
_NON_CLAIM = re.compile(
    r"^(hi|hello|hey|thanks|thank you|hope (this|that) helps|let me know|feel free|"
    r"please (let|reach|contact)|sure|of course|great question|good question)\b", re.I)
_NEGATION = re.compile(r"\b(not|no|never|cannot|can't|won't|isn't|aren't|doesn't|don't|"
                       r"didn't|without|none|nor)\b", re.I)
_ENTITY = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-zA-Z0-9]+(?:\s+[A-Z][a-zA-Z0-9]+)*)")


def decompose(answer: str, max_claims: int, drop_hedges: bool) -> list[str]:
    claims: list[str] = []
    for sent in split_sentences(strip_citations(answer)):
        sent = sent.lstrip("#*-• ").strip()
        if not sent or is_refusal_text(sent):
            continue
        if drop_hedges:
            if _NON_CLAIM.match(sent):
                continue
            sent = _HEDGE_PREFIX.sub("", sent)
        for clause in re.split(r";\s+", sent):
            clause = clause.strip(" ;")
            if len(content_terms(clause)) >= 2:
                claims.append(clause)
    return claims[:max_claims]


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in NUMBER.findall(text)}


def _negated(text: str) -> bool:
    return bool(_NEGATION.search(text))


def _entities(text: str) -> set[str]:
    return {normalize(e) for e in _ENTITY.findall(text)}


def _disagreement(claim: str, sentence: str) -> str | None:
    cn, sn = _numbers(claim), _numbers(sentence)
    if cn and sn and not cn <= sn:
        return "number"
    if _negated(claim) != _negated(sentence):
        return "negation"
    ce, se = _entities(claim), _entities(sentence)
    if ce and se and not (ce & se) and not ce <= set(normalize(sentence).split()):
        return "entity"
    return None


def context_windows(passages: list[str]) -> list[tuple[str, frozenset[str], str]]:
    """Every sentence and pair of adjacent sentences of the passages, with its content terms
    and normalised text: computed once per verification call, shared by all its claims."""
    out = []
    for p in passages:
        sents = split_sentences(p)
        for s in sents + [f"{a} {b}" for a, b in zip(sents, sents[1:])]:
            out.append((s, frozenset(content_terms(s)), normalize(s)))
    return out


def verify_claim(claim: str, windows: list[tuple[str, frozenset[str], str]],
                 threshold: float) -> tuple[str, str | None]:
    """(label, the aligned context sentence or None), against :func:`context_windows`."""
    terms = set(content_terms(claim))
    if not terms:
        return "NOT_FOUND", None
    claim_norm = normalize(claim)
    best: tuple[float, float, str] | None = None
    for s, s_terms, s_norm in windows:
        cov = 100.0 * len(terms & s_terms) / len(terms)
        if cov == 0:
            continue
        tie = fuzz.token_set_ratio(claim_norm, s_norm)
        if best is None or (cov, tie) > best[:2]:
            best = (cov, tie, s)
    if best is None:
        return "NOT_FOUND", None
    cov, _, sent = best
    if cov >= threshold:
        return ("CONTRADICTED" if _disagreement(claim, sent) else "SUPPORTED"), sent
    if cov >= threshold * 0.6 and _disagreement(claim, sent) in ("number", "negation"):
        return "CONTRADICTED", sent
    return "NOT_FOUND", sent


def judge_nugget(nugget: str, answer: str, yes: float, partial: float) -> tuple[str, str | None]:
    terms = set(content_terms(nugget))
    if not terms:
        return "NO", None
    a_terms = set(content_terms(strip_citations(answer)))
    cov = 100.0 * len(terms & a_terms) / len(terms)
    missing_number = bool(_numbers(nugget) - _numbers(answer))
    if cov >= yes and not missing_number:
        return "YES", None
    if cov >= partial:
        return "PARTIAL", None
    return "NO", None


def judge_relevance(question: str, answer: str) -> tuple[str, str]:
    q = set(content_terms(question))
    sents = split_sentences(strip_citations(answer))
    a_terms = set(content_terms(answer))
    q_cov = len(q & a_terms) / len(q) if q else 0.0
    if q_cov < 0.25:
        return "DIFFERENT_QUESTION", f"answer covers {q_cov:.0%} of the question's terms"
    touching = sum(1 for s in sents if q & set(content_terms(s)))
    if sents and touching / len(sents) < 0.5:
        return "ADDS_UNNEEDED", f"{len(sents) - touching} of {len(sents)} sentences off the question"
    return "ANSWERS_AS_ASKED", f"answer covers {q_cov:.0%} of the question's terms"


class HeuristicGraderCfg(Strict):
    name: Literal["heuristic"]
    support_threshold: float = Field(72, ge=0, le=100)
    nugget_yes: float = Field(75, ge=0, le=100)
    nugget_partial: float = Field(50, ge=0, le=100)
    decomposition: DecompositionCfg = Field(default_factory=DecompositionCfg)
    verification: Literal["batched", "per_claim"] = "batched"


@register("grader", "heuristic", config=HeuristicGraderCfg)
class HeuristicGrader:
    """Async interface shared with the Claude grader (see raglab.graders.orchestrate)."""

    backend = "heuristic"

    def __init__(self, cfg: HeuristicGraderCfg, prompts: Any = None, llm: Any = None):
        self.cfg = cfg

    def prompt_texts(self) -> dict[str, str]:
        return {}

    async def decompose(self, question: str, answer: str) -> list[str]:
        d = self.cfg.decomposition
        return decompose(answer, d.max_claims, d.drop_hedges)

    async def verify(self, claims: list[str], passages: list[str],
                     family: str) -> list[tuple[str, str | None]]:
        windows = context_windows(passages)
        return [verify_claim(c, windows, self.cfg.support_threshold) for c in claims]

    async def nuggets(self, question: str, answer: str,
                      nuggets: list[str]) -> list[tuple[str, str | None]]:
        return [judge_nugget(n, answer, self.cfg.nugget_yes, self.cfg.nugget_partial)
                for n in nuggets]

    async def relevance(self, question: str, answer: str) -> tuple[str, str]:
        return judge_relevance(question, answer)

    async def aclose(self) -> None:
        return None
