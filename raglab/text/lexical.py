"""Small lexical helpers shared by the reranker, the extractive generator and the
heuristic grader: content terms with a light, deterministic stemmer."""

from __future__ import annotations

import re
from functools import lru_cache

from raglab.text.normalize import normalize

STOPWORDS = frozenset("""
a an the and or but if then else of to in on at by for with from into onto over under about
is are was were be been being am do does did doing have has had having i me my we our you your
he she it its they them their this that these those there here what which who whom whose when
where why how can could should would will shall may might must not no yes so than too very
just also as up out off any some all each both few more most other such own same only again
further once per via get got please hi hello thanks thank im ive id dont cant wont isnt arent
""".split())

_SUFFIXES = ("ing", "edly", "ed", "ies", "es", "s", "ly")


@lru_cache(maxsize=1 << 16)  # (a sweep's grader stems the same words again and again)
def stem(word: str) -> str:
    for suf in _SUFFIXES:
        if len(word) > len(suf) + 2 and word.endswith(suf):
            return word[: -len(suf)] + ("y" if suf == "ies" else "")
    return word


def content_terms(text: str) -> list[str]:
    return list(_terms(text))


@lru_cache(maxsize=1 << 12)  # the same sentences and claims come back across cases and k
def _terms(text: str) -> tuple[str, ...]:
    return tuple(stem(w) for w in normalize(text).split() if w not in STOPWORDS)


def coverage(query_terms: set[str], text: str) -> float:
    """Fraction of the query's content terms present in ``text`` (0 when the query has none)."""
    if not query_terms:
        return 0.0
    return len(query_terms & set(content_terms(text))) / len(query_terms)


NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
