"""An answer's sentences, its citation markers and its refusal clauses: one split for the
generators, the graders, the runner and the metrics.

Citation markers are ``[n]``, ``[n, m]`` or ``[n-m]`` (1-based passage numbers). A marker
belongs to the sentence it ends or follows: in ``A. [1] B. [2]``, ``A [1]. B [2].`` and
``A.[1][2] B.`` each marker cites the sentence before it. A marker on a heading (or before
the first sentence of a section) cites the first sentence after the heading. A heading is a
segment of its own: it is never a factual sentence.

A refusal phrase ("I don't know", "the documents do not mention ...") makes the clause it
is in a refusal, not the whole sentence: in "There is no information on that, but the fee
is 20 EUR per month." the second clause is still asserted. An abstention declines and
asserts nothing.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from raglab.text.lexical import content_terms
from raglab.text.sentences import MARKER, segments, strip_citations

__all__ = ["AnswerSentence", "answer_sentences", "asserted_clauses", "citations_of",
           "claims_of", "declines", "factual_sentences", "is_refusal", "parse_citations",
           "strip_citations"]

_SRC = r"(documents?|passages?|context|sources?|knowledge\s+base|articles?|information\s+provided)"
REFUSAL = re.compile(
    r"\b(i\s+(do\s*n[o']?t|don't|cannot|can't|could\s*n[o']?t|couldn't|am\s+unable\s+to|"
    r"am\s+not\s+able\s+to|was\s+unable\s+to)\s+"
    r"(know|find|answer|say|help\s+with\s+that|determine|tell|see|locate)"
    r"|(no|not\s+enough|insufficient)\s+information"
    r"|(cannot|can't|unable\s+to)\s+(find|answer|determine|locate|say|tell)"
    r"|(isn't|is\s+not|not|aren't|are\s+not)\s+(mentioned|covered|stated|available|listed|"
    r"specified|included|given|provided|described|documented|found)\s+in\s+the\s+"
    r"(provided|available|given|retrieved)?\s*" + _SRC +
    r"|" + _SRC + r"\s+(do\s*n[o']?t|don't|does\s*n[o']?t|doesn't|did\s*n[o']?t|didn't)\s+"
    r"(say|mention|contain|include|specify|cover|state|describe|list|provide|give|tell|"
    r"have|address)"
    r"|do\s+not\s+(contain|include|mention)\s+(the\s+)?(answer|information))",
    re.IGNORECASE)
# sentences that assert nothing about the question: greetings, thanks, offers of help
NON_CLAIM = re.compile(
    r"^(hi|hello|hey|thanks|thank you|hope (this|that) helps|let me know|feel free|"
    r"please (let|reach|contact)|sure|of course|great question|good question)\b", re.I)
# a clause that only apologises or softens a refusal
_FILLER = re.compile(r"^(sorry|unfortunately|i'?m sorry|i am sorry|apologies|i apologi[sz]e|"
                     r"regrettably|i'?m afraid|i am afraid|however|but|so)$", re.I)
_CLAUSE = re.compile(r"\s*[;,]\s*(?:(?:but|however|although|though|yet|while|whereas|and|so)"
                     r"\b,?\s*)?|\s+(?:but|however|although|though|yet|whereas)\b,?\s+", re.I)
_WORD = re.compile(r"[^\W_]")
_HEDGE_PREFIX = re.compile(
    r"^(i think|i believe|it seems( that)?|it appears( that)?|probably|perhaps|maybe|"
    r"in short|overall|basically|to summari[sz]e|based on the (documents|passages|context)),?\s+",
    re.I)
_NEGATION = re.compile(r"\b(not|no|never|cannot|can't|won't|isn't|aren't|doesn't|don't|"
                       r"didn't|without|none|nor)\b", re.I)
# a short direct answer is a claim although it has few content terms ("Yes.", "Not possible.")
_POLAR = re.compile(r"^(yes|no|yeah|yep|nope|correct|incorrect|true|false|never|always|"
                    r"(not\s+)?possible)\b", re.I)


class AnswerSentence(NamedTuple):
    """One sentence (or heading) of an answer: its text without citation markers, the
    1-based passage numbers its markers cite, and whether it is a heading."""

    text: str
    refs: tuple[int, ...]
    heading: bool


def _refs(group: str) -> list[int]:
    out: list[int] = []
    for part in re.split(r"\s*[,;]\s*", group.strip()):
        bounds = re.split(r"\s*[-\u2013]\s*", part)
        if len(bounds) == 2 and bounds[0] and bounds[1] and int(bounds[0]) <= int(bounds[1]) \
                and int(bounds[1]) - int(bounds[0]) < 50:
            out += range(int(bounds[0]), int(bounds[1]) + 1)
        else:
            out += [int(b) for b in bounds if b]
    return out


def _strip_markers(answer: str) -> tuple[str, list[tuple[int, list[int]]]]:
    """The answer without markers and, for each marker, its position in that text."""
    parts: list[str] = []
    marks: list[tuple[int, list[int]]] = []
    pos = length = 0
    for m in MARKER.finditer(answer):
        parts.append(answer[pos:m.start()])
        length += m.start() - pos
        marks.append((length, _refs(m.group(1))))
        pos = m.end()
        after = answer[pos:pos + 1]
        # "A.[1]B." : the marker was the only boundary after the sentence's punctuation
        if after and not after.isspace() and not MARKER.match(answer, pos) \
                and answer[:m.start()].rstrip()[-1:] in ".!?":
            parts.append(" ")
            length += 1
    parts.append(answer[pos:])
    return "".join(parts), marks


def answer_sentences(answer: str | None) -> list[AnswerSentence]:
    """The answer's sentences and headings in order, each with the markers it carries."""
    if not answer:
        return []
    text, marks = _strip_markers(answer)
    segs = segments(text)
    refs: list[list[int]] = [[] for _ in segs]
    for pos, numbers in marks:
        i = _owner(segs, pos)
        while i is not None and i < len(segs) and segs[i].heading:
            i += 1  # a heading cites nothing: its marker goes to the section's sentence
        if i is not None and i < len(segs):
            refs[i] += numbers
    return [AnswerSentence(s.text, tuple(sorted(set(r))), s.heading)
            for s, r in zip(segs, refs)]


def _owner(segs, pos: int) -> int | None:
    """The segment a marker at ``pos`` belongs to: the one it is in or ends, else the one
    before it; before the first segment, the first."""
    owner = None
    for i, s in enumerate(segs):
        if s.start <= pos <= s.end:
            return i
        if s.end < pos:
            owner = i
        else:
            break
    return 0 if owner is None and segs else owner


def parse_citations(answer: str | None, n_context: int) -> list[dict[str, Any]]:
    """``[{"sentence": i, "context": [0-based passage, ...]}]`` from the answer's markers;
    sentence ``i`` indexes :func:`answer_sentences`; markers beyond the context are dropped."""
    out = []
    for i, s in enumerate(answer_sentences(answer)):
        ctx = [r - 1 for r in s.refs if 1 <= r <= n_context]
        if ctx:
            out.append({"sentence": i, "context": ctx})
    return out


def citations_of(output: dict[str, Any]) -> list[dict[str, Any]]:
    """A system output's citations: the explicit ones when it has any, else those its
    answer's markers give (for every system: replay, http, python or reference)."""
    explicit = output.get("citations") or []
    if explicit:
        return [{"sentence": c["sentence"], "context": list(c.get("context") or [])}
                for c in explicit]
    return parse_citations(output.get("answer"), len(output.get("context") or []))


# -- refusals -------------------------------------------------------------------------------

def is_refusal(text: str) -> bool:
    """Whether the text holds a refusal phrase."""
    return bool(REFUSAL.search(text or ""))


def asserted_clauses(sentence: str) -> list[str]:
    """The sentence without its refusal clauses (and the apologies around them): ``[]``
    when it only declines, ``[sentence]`` when it holds no refusal."""
    bare = sentence.strip().strip(".!? ")
    if _FILLER.match(bare):
        return []
    if not is_refusal(sentence):
        return [sentence]
    kept = [p.strip() for p in _CLAUSE.split(sentence)
            if p and p.strip() and not is_refusal(p) and not _FILLER.match(p.strip(" .!?"))
            and _WORD.search(p)]
    return [", ".join(kept)] if kept else []


def declines(answer: str | None) -> bool:
    """An abstention without a grader: the answer is empty, or it holds a refusal phrase
    and asserts nothing else (greetings and offers of help assert nothing)."""
    if answer is None:
        return False
    sents = [s.text for s in answer_sentences(answer) if not s.heading]
    if not any(_WORD.search(s) for s in sents):
        return True
    if not any(is_refusal(s) for s in sents):
        return False
    return not any(_WORD.search(c) for s in sents if not NON_CLAIM.match(s)
                   for c in asserted_clauses(s))


# -- claims ---------------------------------------------------------------------------------

def _is_claim(clause: str) -> bool:
    n = len(content_terms(clause))
    return n >= 2 or bool(_POLAR.match(clause)) or (n == 1 and bool(_NEGATION.search(clause)))


def sentence_claims(sentence: str, drop_hedges: bool = True) -> list[str]:
    """The claims of one (non-heading) sentence: its ';'-clauses with two or more content
    terms (or a short direct answer: "Yes.", "Not possible."), refusal clauses apart; with
    ``drop_hedges`` greetings and offers of help are no claims and hedges are cut off."""
    sent = sentence.lstrip("#*-\u2022 ").strip()
    if not sent or (drop_hedges and NON_CLAIM.match(sent)):
        return []
    out: list[str] = []
    for part in asserted_clauses(sent):
        if drop_hedges:
            part = _HEDGE_PREFIX.sub("", part)
        for clause in re.split(r";\s+", part):
            clause = clause.strip(" ;")
            if _is_claim(clause):
                out.append(clause)
    return out


def claims_of(answer: str | None, max_claims: int, drop_hedges: bool) -> list[str]:
    """The offline decomposition of an answer into claims, in order, at most ``max_claims``."""
    claims = [c for s in answer_sentences(answer) if not s.heading
              for c in sentence_claims(s.text, drop_hedges)]
    return claims[:max_claims]


def factual_sentences(answer: str | None) -> list[int]:
    """Indices (of :func:`answer_sentences`) of the sentences that state at least one claim:
    the denominator of citation coverage and the sentences whose citations are verified."""
    return [i for i, s in enumerate(answer_sentences(answer))
            if not s.heading and sentence_claims(s.text)]
