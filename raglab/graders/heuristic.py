"""The offline, deterministic grader (no model, no key).

What it does, and its limits (also in docs/graders.md):
- claims: raglab.text.answers.claims_of: the answer's sentences (and ';'-separated
  clauses), headings, citation markers, greetings, hedges and refusal clauses dropped (the
  facts beside a refusal are kept; "Yes." is a claim). Pronouns are NOT resolved.
- verification: each claim is aligned with the context sentence covering most of its
  content terms (light stemming; rapidfuzz token ratio breaks ties). Covered at
  ``support_threshold`` or above: SUPPORTED, unless a quantity, date or time of the claim
  differs from every one of the same unit in that sentence, a term is negated in the one
  and affirmed in the other, or a capitalised entity disagrees (CONTRADICTED; quantities
  and negation scopes: raglab.graders.quantities; entities are compared word by word, so
  a heading glued to its sentence is no disagreement). Number words count as digits.
  Partly covered with a quantity, date or negation disagreement: CONTRADICTED. Otherwise
  NOT_FOUND. Paraphrases with
  other words are missed (NOT_FOUND), and contradictions that need world knowledge are
  missed.
- nuggets: term coverage of the nugget by the answer (YES / PARTIAL / NO thresholds); then
  the answer sentence aligned with the nugget must agree in polarity and numbers (else NO);
  a number of the nugget missing from the answer caps it at PARTIAL.
- relevance: :func:`judge_relevance` (topic coverage, the asked slot, the question's own
  numbers and names, off-question sentences).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from pydantic import Field
from rapidfuzz import fuzz

from raglab.components import Grader
from raglab.config import DecompositionCfg
from raglab.data.schema import Strict
from raglab.graders.quantities import canonical, polarity_disagreement
from raglab.graders.quantities import disagreement as quantity_disagreement
from raglab.registry import register
from raglab.text.answers import answer_sentences, claims_of, strip_citations
from raglab.text.lexical import STOPWORDS, content_terms
from raglab.text.normalize import normalize
from raglab.text.sentences import split_sentences

__all__ = ["HeuristicGrader", "context_windows", "decompose", "judge_nugget",
           "judge_relevance", "split_sentences", "strip_citations", "verify_claim"]

_NEGATION = re.compile(r"\b(not|no|never|cannot|can't|won't|isn't|aren't|doesn't|don't|"
                       r"didn't|without|none|nor)\b", re.I)
_ENTITY = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-zA-Z0-9]+(?:\s+[A-Z][a-zA-Z0-9]+)*)")


def decompose(answer: str, max_claims: int, drop_hedges: bool) -> list[str]:
    """Claims of an answer (raglab.text.answers.claims_of): its sentences and ';'-clauses,
    headings, citation markers and refusal clauses apart; with ``drop_hedges`` greetings and
    hedges too."""
    return claims_of(answer, max_claims, drop_hedges)


def _negated(text: str) -> bool:
    return bool(_NEGATION.search(text))


def _entity_tokens(text: str) -> set[str]:
    """Tokens of the capitalised names of a text (not its first word, not stopwords)."""
    return {t for e in _ENTITY.findall(text) for t in normalize(e).split() if t not in STOPWORDS}


def _disagreement(claim: str, sentence: str) -> str | None:
    """How a claim disagrees with its aligned context sentence (raglab.graders.quantities):
    a quantity or date of the claim that differs from every one of the same unit the
    sentence states ("number", "date"), a term the one negates and the other affirms
    ("negation"), or each naming an entity the
    other does not (token-wise, so a heading glued to its sentence is no disagreement)."""
    kind = quantity_disagreement(claim, sentence)
    if kind:
        return kind
    if polarity_disagreement(claim, sentence):
        return "negation"
    ce, se = _entity_tokens(claim), _entity_tokens(sentence)
    if ce - set(normalize(sentence).split()) and se - set(normalize(claim).split()):
        return "entity"
    return None


Window = tuple[str, frozenset[str], str, int, int]
"""A context window: its text, content terms, normalised text, passage index and number of
sentences (1 or 2)."""


def context_windows(passages: list[str]) -> list[Window]:
    """Every sentence and pair of adjacent sentences of the passages, with its content terms,
    normalised text, passage index and size: computed once per verification call, shared
    by all its claims (and each passage's once per process: the same passages come back in
    other cases and, in a sweep, at every ``k``)."""
    return [(s, terms, norm, pi, size) for pi, p in enumerate(passages)
            for s, terms, norm, size in _passage_windows(p)]


@lru_cache(maxsize=1 << 12)
def _passage_windows(passage: str) -> tuple[tuple[str, frozenset[str], str, int], ...]:
    sents = split_sentences(passage)
    return tuple((s, frozenset(content_terms(canonical(s))), normalize(s), size)
                 for s, size in [(s, 1) for s in sents]
                 + [(f"{a} {b}", 2) for a, b in zip(sents, sents[1:])])


def verify_claim(claim: str, windows: list[Window],
                 threshold: float) -> tuple[str, str | None]:
    """(label, the aligned context sentence or None), against :func:`context_windows`.

    The claim is aligned by its words, not its numbers: the window covering most of its
    content terms other than numbers, a single sentence before a pair on equal coverage,
    then the coverage of all its terms (rapidfuzz token ratio breaks further ties); that
    coverage decides, and the quantities are compared (a number of the claim stated in
    the next sentence about something else does not choose the pair)."""
    terms = set(content_terms(canonical(claim)))
    if not terms:
        return "NOT_FOUND", None
    words = {t for t in terms if not any(ch.isdigit() for ch in t)} or terms
    claim_norm = normalize(claim)
    best: tuple[float, int, float, float, str] | None = None
    for s, s_terms, s_norm, _, size in windows:
        cov = 100.0 * len(terms & s_terms) / len(terms)
        if cov == 0:
            continue
        key = (len(words & s_terms) / len(words), -size, cov)
        if best is not None and key < best[:3]:
            continue
        tie = fuzz.token_set_ratio(claim_norm, s_norm)
        if best is None or (*key, tie) > best[:4]:
            best = (*key, tie, s)
    if best is None:
        return "NOT_FOUND", None
    *_, cov, _, sent = best
    if cov >= threshold:
        return ("CONTRADICTED" if _disagreement(claim, sent) else "SUPPORTED"), sent
    if cov >= threshold * 0.6 and _disagreement(claim, sent) in ("number", "date", "negation"):
        return "CONTRADICTED", sent
    return "NOT_FOUND", sent


_CLAUSE_SPLIT = re.compile(r"\s*[;,:]\s*|\s+(?:but|so|because|although|though|whereas|unless)"
                           r"\s+", re.I)


def _aligned_clauses(terms: set[str], text: str) -> tuple[list[str], int]:
    """The clauses of ``text`` (its sentences cut at commas and conjunctions) that cover
    most of ``terms``, and how many terms they cover."""
    best: list[str] = []
    best_cov = 0
    for sent in split_sentences(text):
        for clause in _CLAUSE_SPLIT.split(sent):
            cov = len(terms & set(content_terms(clause)))
            if cov > best_cov:
                best, best_cov = [clause], cov
            elif cov == best_cov and cov > 0:
                best.append(clause)
    return best, best_cov


def judge_nugget(nugget: str, answer: str, yes: float, partial: float) -> tuple[str, str | None]:
    """YES / PARTIAL / NO by term coverage of the nugget, then clause by clause: an answer
    clause aligned with a clause of the nugget but of opposite polarity makes it NO when it
    covers that clause (at ``yes``), else caps it at PARTIAL; another number where the
    nugget has one (in the aligned clause) is NO; a number of the nugget missing from the
    answer caps it at PARTIAL."""
    terms = set(content_terms(nugget))
    if not terms:
        return "NO", None
    text = strip_citations(answer)
    cov = 100.0 * len(terms & set(content_terms(text))) / len(terms)
    if cov < partial:
        return "NO", None
    capped = False
    for part in _CLAUSE_SPLIT.split(nugget):  # each clause of the nugget, its own polarity
        p_terms = set(content_terms(part))
        p_clauses, p_n = _aligned_clauses(p_terms, text)
        if p_n and not any(_negated(c) == _negated(part) for c in p_clauses):
            if 100.0 * p_n / len(p_terms) >= yes:
                return "NO", p_clauses[0]
            capped = True
    clauses, n = _aligned_clauses(terms, text)
    strong = 100.0 * n / len(terms) >= yes
    evidence = clauses[0] if clauses else None
    nn = _plain_numbers(nugget)
    missing_number = bool(nn - _plain_numbers(text))
    if missing_number and strong and any(_plain_numbers(c) and not nn & _plain_numbers(c)
                                         for c in clauses):
        return "NO", evidence
    if cov >= yes and not missing_number and not capped:
        return "YES", evidence
    return "PARTIAL", evidence


# What a question asks for, when it asks for a value: a quantity or a time.
_ASKS_QUANTITY = re.compile(
    r"\bhow\s+(many|much|long|often|soon|late|far|big|large|old)\b"
    r"|\bwhat\s+(percentage|percent|rate|fee|price|cost|amount|number|limit|size)\b"
    r"|\b(max|maximum|min|minimum)\b", re.I)
_ASKS_TIME = re.compile(r"^\s*when\b|\bwhen\s+(do|does|is|are|will|can|should|did|would|"
                        r"must)\b|\bwhat\s+(time|date|day)\b|\bby\s+when\b|\bwhich\s+day\b",
                        re.I)
_QUANTITY = re.compile(
    r"\d|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|once|twice|"
    r"daily|weekly|monthly|yearly|annually|hourly|free|unlimited|no\s+limit|none|half|"
    r"dozen|hundred|thousand)\b", re.I)
_TIME = re.compile(
    r"\d|\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|"
    r"march|april|may|june|july|august|september|october|november|december|today|"
    r"tomorrow|tonight|yesterday|immediately|instantly|now|next|after|before|until|"
    r"renewal|end|start|beginning|daily|weekly|monthly|annually|yearly|midnight|noon|once|"
    r"every|morning|evening|night|week|month|year|quarter|day)\b", re.I)
_ON_QUESTION = 0.25  # a sentence touches the question when it covers this share of its terms
_TOPIC_MIN = 0.34    # an answer covering less of the question's terms is off topic


def asked_slot(question: str) -> str | None:
    """``"quantity"`` or ``"time"`` when the question asks for such a value, else None."""
    if _ASKS_QUANTITY.search(question):
        return "quantity"
    if _ASKS_TIME.search(question):
        return "time"
    return None


_PLAIN_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)*(?:st|nd|rd|th)?\b")
_CALENDAR = frozenset("""monday tuesday wednesday thursday friday saturday sunday january
february march april may june july august september october november december""".split())


def _names(text: str) -> set[str]:
    """Content terms of the capitalised names of a text, calendar words apart."""
    return set(content_terms(" ".join(_ENTITY.findall(text)))) - _CALENDAR - {"i"}


def _plain_numbers(text: str) -> set[str]:
    """Standalone numbers (not the digits of a code such as T2), without leading zeros."""
    return {n.replace(",", "").lstrip("0") or "0" for n in _PLAIN_NUMBER.findall(text)}


def _other_subject(question: str, text: str, a_terms: set[str]) -> str | None:
    """Why the answer is about something else: it states none of the question's numbers
    but others, or none of its (two or more) names but others."""
    qn, an = _plain_numbers(question), _plain_numbers(text)
    if qn and an and not qn & an:
        return f"asks about {', '.join(sorted(qn))}; the answer states {', '.join(sorted(an))}"
    keys = _names(question)
    others = _names(text) - set(content_terms(question))
    if len(keys) >= 2 and not keys & a_terms and others:
        return f"asks about {', '.join(sorted(keys))}; answers about {', '.join(sorted(others))}"
    return None


def judge_relevance(question: str, answer: str) -> tuple[str, str]:
    """DIFFERENT_QUESTION when the answer covers under a third of the question's terms,
    gives no value of the kind asked (a quantity, a time), or answers about other numbers
    or names than the question's; ADDS_UNNEEDED when half or
    more of its sentences do not touch the question; else ANSWERS_AS_ASKED."""
    q = set(content_terms(question))
    sents = [s.text for s in answer_sentences(answer) if not s.heading]
    text = " ".join(sents)
    a_terms = set(content_terms(text))
    q_cov = len(q & a_terms) / len(q) if q else 0.0
    if q_cov < _TOPIC_MIN:
        return "DIFFERENT_QUESTION", f"answer covers {q_cov:.0%} of the question's terms"
    slot = asked_slot(question)
    if slot and not (_QUANTITY if slot == "quantity" else _TIME).search(text):
        return "DIFFERENT_QUESTION", f"the question asks for a {slot}; the answer gives none"
    other = _other_subject(question, text, a_terms)
    if other:
        return "DIFFERENT_QUESTION", other
    need = max(1, round(_ON_QUESTION * len(q)))
    off = sum(1 for s in sents if len(q & set(content_terms(s))) < need)
    if sents and 2 * off >= len(sents):
        return "ADDS_UNNEEDED", f"{off} of {len(sents)} sentences off the question"
    return "ANSWERS_AS_ASKED", f"answer covers {q_cov:.0%} of the question's terms"


class HeuristicGraderCfg(Strict):
    name: Literal["heuristic"]
    support_threshold: float = Field(72, ge=0, le=100, description=(
        "a claim is SUPPORTED when its best-aligned context sentence scores at least this "
        "(0-100); correctness: claim support against the reference answer instead"))
    nugget_yes: float = Field(75, ge=0, le=100, description="nugget: YES at or above this")
    nugget_partial: float = Field(50, ge=0, le=100, description=(
        "nugget: PARTIAL at or above this"))
    decomposition: DecompositionCfg = Field(default_factory=DecompositionCfg)
    verification: Literal["batched", "per_claim"] = "batched"
    repeats: int = Field(1, ge=1, le=100, description=(
        "independent judgments per item (README \"Grader calibration\"); run metrics are "
        "their mean; at most 100"))


def _stated(answer: str) -> str:
    """What an answer states: its claims, one sentence each, in order."""
    claims = claims_of(answer, max_claims=1 << 30, drop_hedges=False)
    return " ".join(c if c.rstrip()[-1:] in (".", "!", "?") else c.rstrip() + "."
                    for c in claims)


@register("grader", "heuristic", config=HeuristicGraderCfg)
class HeuristicGrader(Grader):
    """Async interface shared with the Claude grader (see raglab.graders.orchestrate)."""

    #: the same inputs always get the same judgment: repeats are never asked (agreement 1)
    deterministic = True
    #: correctness 2: the answer's refusal clauses are set apart before the reference's
    #: claims are looked for in it ("no information on X, but Y" states Y);
    #: claim verification 2 (faithfulness, citations, correctness 3): numbers compared
    #: with their units, number words, dates and times, negations over the same terms
    #: (raglab.graders.quantities); claim verification 3 (faithfulness, citations;
    #: correctness 4): the words before a negation are its subject, not affirmed; both
    #: negating the same terms is no contradiction; "not ... until", "can't ... without"
    rules_versions = {"correctness": 4, "faithfulness": 3, "citations": 3}

    async def decompose(self, question: str, answer: str) -> list[str]:
        d = self.cfg.decomposition
        return decompose(answer, d.max_claims, d.drop_hedges)

    async def verify(self, claims: list[str], passages: list[str],
                     family: str) -> list[tuple[str, str | None, int | None]]:
        """(label, aligned sentence, index of the passage holding it) per claim. For
        correctness the passage is the answer: its claims (refusal clauses, headings and
        citation markers apart, as :func:`decompose` cuts them) are what it states."""
        if family == "correctness":
            passages = [_stated(p) for p in passages]
        windows = context_windows(passages)
        passage_of: dict[str, int] = {}
        for w in windows:
            passage_of.setdefault(w[0], w[3])
        out = []
        for c in claims:
            label, sent = verify_claim(c, windows, self.cfg.support_threshold)
            out.append((label, sent, passage_of.get(sent) if sent is not None else None))
        return out

    async def nuggets(self, question: str, answer: str,
                      nuggets: list[str]) -> list[tuple[str, str | None]]:
        return [judge_nugget(n, answer, self.cfg.nugget_yes, self.cfg.nugget_partial)
                for n in nuggets]

    async def relevance(self, question: str, answer: str) -> tuple[str, str]:
        return judge_relevance(question, answer)

    async def aclose(self) -> None:
        return None
