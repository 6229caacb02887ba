"""The quantities, dates and times a text states, and the polarity of its clauses: what the
offline grader (raglab.graders.heuristic) compares a claim with its evidence by.

- A quantity is a number with its unit: the unit word after it ("5 business days", "120
  requests per minute", "three failed debits", "30%", "€69", "20 EUR"), or, with no unit
  word after it, the word before it ("Net 10"). Number words count when a unit follows
  ("five days", "two-year"); "1,000" is 1000; a range "5 to 10 days" gives both ends the
  unit. Durations (seconds to weeks), months and years, metric lengths and masses are
  converted to one base unit each ("one hour" is "60 minutes", "2 km" is "2000 m"); a
  business or working day is a unit of its own. The digits of a code ("T2", "UTF-8",
  "CAMT.053") are no quantity.
- Dates and times: a day and month ("1 April", "March 31", "2026-03-14"), the day of the
  month ("the 25th"), a year ("March 2026") and a time of day ("17:00", "5 pm", "10.30
  am"; "10.30" alone is a number: "€10.30").
- Pure functions, no state: the same text always gives the same quantities.
"""

from __future__ import annotations

import re
from functools import lru_cache

from raglab.text.lexical import STOPWORDS, stem

__all__ = ["Quantity", "canonical", "disagreement", "negated", "polarity_disagreement",
           "polarity_terms", "quantities"]

Quantity = tuple[str, float]
"""(unit, value in that unit's base): ("duration", 3600.0) is one hour."""

_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
                      "eighty": 80, "ninety": 90, "hundred": 100})
_UNITS: dict[str, tuple[str, float]] = {}
for _names, _dim, _f in (("second seconds sec secs s", "duration", 1),
                         ("minute minutes min mins", "duration", 60),
                         ("hour hours hr hrs h", "duration", 3600),
                         ("day days", "duration", 86400),
                         ("week weeks", "duration", 604800),
                         ("month months", "months", 1), ("year years", "months", 12),
                         ("km kilometre kilometres kilometer kilometers", "length", 1000),
                         ("m metre metres meter meters", "length", 1),
                         ("cm centimetre centimetres", "length", 0.01),
                         ("mm millimetre millimetres", "length", 0.001),
                         ("kg kilogram kilograms", "mass", 1000), ("g gram grams", "mass", 1),
                         ("percent %", "percent", 1)):
    for _n in _names.split():
        _UNITS[_n] = (_dim, _f)
_CURRENCY = {"£": "gbp", "€": "eur", "$": "usd", "gbp": "gbp", "eur": "eur", "usd": "usd",
             "euro": "eur", "euros": "eur", "dollar": "usd", "dollars": "usd", "pounds": "gbp"}
_WORKDAY = frozenset({"business", "working", "work"})
_MONTHS = {m: i + 1 for i, m in enumerate(
    "january february march april may june july august september october november "
    "december".split())}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items()) if m != "may"})
_MONTH = r"(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b\.?"
_ORD = r"(?:st|nd|rd|th)?"

_DATE_PATTERNS = (
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})(?:T[\d:.+-]*Z?)?"), "ymd"),
    (re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_MONTH})(?:,?\s+(\d{{4}}))?", re.I), "dmy"),
    (re.compile(rf"\b({_MONTH})\s+(\d{{1,2}}){_ORD}(?!\d)(?:,?\s+(\d{{4}}))?", re.I), "mdy"),
    (re.compile(rf"\b({_MONTH})\s+(\d{{4}})\b", re.I), "my"),
    (re.compile(r"\b(\d{1,2}):(\d{2})\s*([ap]\.?m\.?)?(?![\d:])", re.I), "clock"),
    (re.compile(r"(?<![\d.,£€$])\b(\d{1,2})\.(\d{2})\s*([ap]\.?m\.?)(?!\w)", re.I), "clock"),
    (re.compile(r"\b(\d{1,2})\s*([ap]\.?m\.?)(?!\w)", re.I), "ampm"),
    (re.compile(r"\bthe\s+(\d{1,2})(?:st|nd|rd|th)\b", re.I), "dom"),
    (re.compile(r"\b(noon|midday|midnight)\b", re.I), "named"),
)
_NUM = r"\d+(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_WORDNUM = "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))
_QUANTITY = re.compile(
    rf"(?P<cur>[£€$])?\s?(?<![\w.,-])(?P<num>{_NUM}|(?:{_WORDNUM})\b)"
    rf"(?:\s*(?:to|-|–|or|and)\s*(?:[£€$])?(?:{_NUM}|(?:{_WORDNUM})\b))?"
    r"(?P<tail>(?:\s*%|[-\s]*[A-Za-z]+(?:[-\s]+[A-Za-z]+)?)?)", re.I)
_RANGE_END = re.compile(rf"(?:to|-|–|or|and)\s*(?:[£€$])?({_NUM}|(?:{_WORDNUM})\b)", re.I)
_CODE_AFTER = re.compile(r"^[A-Za-z]*\d")  # "2FA3": still a code
_YEAR = re.compile(r"^(19|20)\d\d$")


def _value(token: str) -> float | None:
    t = token.lower().replace(",", "")
    if t in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[t])
    try:
        return float(t)
    except ValueError:
        return None


def _token(q: Quantity) -> str:
    """A quantity as one word: ("duration", 3600.0) is "qduration3600"."""
    unit, value = q
    v = str(int(value)) if value == int(value) else repr(value).replace(".", "p")
    return "q" + re.sub(r"\W", "", unit) + v.replace("-", "m")


def _words(qs: list[Quantity], unit_word: bool = True) -> str:
    """The words standing for quantities in :func:`canonical`: each one's token, and the
    word of its unit ("uduration") that replaces the unit words taken out."""
    units = sorted({"u" + re.sub(r"\W", "", u) for u, _ in qs}) if unit_word else []
    return " " + " ".join([_token(q) for q in qs] + units) + " "


def _dates(text: str, out: list[Quantity]) -> str:
    """Dates and times of the text added to ``out``; the text with each replaced by its
    quantities' words."""
    for pat, kind in _DATE_PATTERNS:
        def take(m: re.Match[str], kind: str = kind) -> str:
            g = m.groups()
            found: list[tuple[str, int]] = []
            if kind == "ymd":
                found = [("date", int(g[1]) * 100 + int(g[2])), ("year", int(g[0])),
                         ("dom", int(g[2]))]
            elif kind in ("dmy", "mdy"):
                day, month = (g[0], g[1]) if kind == "dmy" else (g[1], g[0])
                found = [("date", _MONTHS[month.lower().rstrip(".")] * 100 + int(day)),
                         ("dom", int(day))]
                if g[2]:
                    found.append(("year", int(g[2])))
            elif kind == "my":
                found = [("year", int(g[1]))]
            elif kind == "clock":
                h = int(g[0]) % 12 if g[2] else int(g[0])
                h += 12 if g[2] and g[2].lower().startswith("p") else 0
                found = [("clock", h * 60 + int(g[1]))]
            elif kind == "ampm":
                h = int(g[0]) % 12 + (12 if g[1].lower().startswith("p") else 0)
                found = [("clock", h * 60)]
            elif kind == "dom":
                found = [("dom", int(g[0]))]
            else:
                found = [("clock", 0 if g[0].lower() == "midnight" else 720)]
            qs = [(u, float(v)) for u, v in found]
            out.extend(qs)
            return _words(qs)
        text = pat.sub(take, text)
    return text


def _unit(tail: str, before: str) -> tuple[str, float, int] | None:
    """(unit, factor, characters of ``tail`` naming it) from the words after a number
    (a known unit is converted), else the content word before it (factor 1, nothing of
    the tail)."""
    words = [(w.group(0).lower(), w.end()) for w in re.finditer(r"%|[A-Za-z]+", tail)]
    if words and words[0][0] == "%":
        return "percent", 1.0, words[0][1]
    if len(words) > 1 and words[0][0] in _WORKDAY and stem(words[1][0]) == "day":
        return "workday", 1.0, words[1][1]
    for w, end in words[:2]:
        if w in _CURRENCY:
            return "cur:" + _CURRENCY[w], 1.0, end
        if w in _UNITS:
            return (*_UNITS[w], end)
        if w != "calendar":
            break
    if words and words[0][0] not in STOPWORDS:
        return stem(words[0][0]), 1.0, 0
    prev = re.findall(r"[A-Za-z]+", before[-40:])
    if prev and prev[-1].lower() not in STOPWORDS:
        return "after:" + stem(prev[-1].lower()), 1.0, 0
    return None


@lru_cache(maxsize=1 << 12)
def _scan(text: str) -> tuple[frozenset[Quantity], str]:
    found: list[Quantity] = []
    rest = _dates(text, found)
    out = set(found)
    pieces: list[str] = []
    pos = 0
    for m in _QUANTITY.finditer(rest):
        num, tail, cur = m.group("num"), m.group("tail") or "", m.group("cur")
        if _CODE_AFTER.match(rest[m.end("num"):]):
            continue  # digits glued to letters: a code ("T2", "P80")
        if m.start("num") > 0 and re.match(r"[A-Za-z]", rest[m.start("num") - 1]):
            continue
        value = _value(num)
        if value is None:
            continue
        end = _RANGE_END.search(rest, m.end("num"), m.start("tail"))
        values = [value] + ([v] if end and (v := _value(end.group(1))) is not None else [])
        word_number = not num[0].isdigit()
        unit = ("cur:" + _CURRENCY[cur], 1.0, 0) if cur else _unit(tail, rest[:m.start()])
        if unit is None:
            if word_number:
                continue  # "one of them": a number word needs its unit
            unit = ("", 1.0, 0)
        if word_number and unit[0].startswith("after:"):
            continue
        if unit[0] == "" and len(values) == 1 and _YEAR.match(num):
            unit = ("year", 1.0, 0)
        qs = [(unit[0], v * unit[1]) for v in values]
        out.update(qs)
        pieces += [rest[pos:m.start()], _words(qs, bool(cur) or unit[2] > 0)]
        pos = m.start("tail") + unit[2]
    pieces.append(rest[pos:])
    canon = "".join(pieces)
    for m in re.finditer(r"\bevery\s+([a-z]+)\b", canon, re.I):
        u = _UNITS.get(m.group(1).lower())
        if u and u[0] in ("duration", "months"):  # "every hour" states one hour
            out.add((u[0], float(u[1])))
    canon = re.sub(r"\b(every\s+)([a-z]+)\b", lambda m: m.group(1) + (
        _words([(_UNITS[w][0], float(_UNITS[w][1]))]) if (w := m.group(2).lower()) in _UNITS
        and _UNITS[w][0] in ("duration", "months") else m.group(2)), canon, flags=re.I)
    return frozenset(out), canon


def quantities(text: str) -> frozenset[Quantity]:
    """Every quantity, date and time the text states, as (unit, value) pairs."""
    return _scan(text)[0]


def canonical(text: str) -> str:
    """The text with each quantity, date and time written as one word of its unit and
    value, so that equal quantities are one term ("three days" and "72 hours" are both
    "qduration259200", "5 pm" and "17:00" both "qclock1020"), and a unit word taken out
    by the word of its unit ("uduration", "uclock"): a claim is aligned by it."""
    return _scan(text)[1]


_DATE_UNITS = frozenset({"date", "dom", "year", "clock"})


def disagreement(claim: str, evidence: str) -> str | None:
    """``"date"`` or ``"number"`` when a date, time or quantity of the claim differs from
    every one of the same unit the evidence states (the evidence stating some), else None."""
    ev = quantities(evidence)
    by_unit: dict[str, set[float]] = {}
    for u, v in ev:
        by_unit.setdefault(u, set()).add(v)
    kinds = set()
    for u, v in quantities(claim):
        same = by_unit.get(u)
        if same and not any(abs(v - w) <= 1e-9 * max(1.0, abs(v)) for w in same):
            kinds.add("date" if u in _DATE_UNITS else "number")
    if "number" in kinds:
        return "number"
    return "date" if kinds else None


_NEGATION = re.compile(r"\b(not|no|never|cannot|can't|won't|isn't|aren't|doesn't|don't|"
                       r"didn't|without|none|nor|neither)\b|n't\b", re.I)
# "not charged until delivery" states the charge at delivery: no negation of the charge
_UNTIL = re.compile(r"\b(?:until|till|before)\b", re.I)
# "cannot export without admin rights": exporting needs admin rights
_WITHOUT = re.compile(r"\bwithout\b", re.I)
# a comma or colon glued to a digit is part of a number or a time ("1,000", "10:30")
_CLAUSE = re.compile(r"\s*(?:[;()]|[,:](?!\d))\s*|\s+(?:and|but|or|so|because|although|"
                     r"though|whereas|unless|while|which|if|when)\s+|"
                     r"\s+(?=(?:you|we|they|he|she|i)\s)|(?<=[.!?])\s+", re.I)

# a capitalised function word inside a text starts a sentence (a heading glued to its text)
_GLUED = re.compile(r"\s+(?=(?:The|A|An|This|That|These|Those|It|If|When|You|We|They)\s)")


def negated(text: str) -> bool:
    """Whether the text has a negation ("not", "no", "never", "without", ...)."""
    return bool(_NEGATION.search(text))


def _polarity(text: str) -> tuple[set[str], set[str]]:
    """(affirmed, negated) content terms, a term in both when clauses differ over it."""
    from raglab.text.lexical import content_terms

    def terms(t: str) -> set[str]:
        return set(content_terms(canonical(t)))

    affirmed: set[str] = set()
    negative: set[str] = set()
    for clause in (c for part in _GLUED.split(text) for c in _CLAUSE.split(part)):
        if not clause or not clause.strip():
            continue
        m = _NEGATION.search(clause)
        scope = clause[m.end():] if m else ""
        if not m or _UNTIL.search(scope) or (m.group(0).lower() != "without"
                                              and _WITHOUT.search(scope)):
            # no negation; "not ... until X" (it happens at X); "cannot ... without X"
            # (it needs X): the clause states what it names
            affirmed |= terms(clause)
            continue
        after = terms(scope)
        # the words before a negation are its subject ("SSO is not included"): neither
        # affirmed nor negated, so word order does not move them to the other side
        negative |= after or terms(clause[:m.start()])
    return affirmed, negative


def polarity_terms(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(affirmed, negated) content terms of a text. A negation's scope is the rest of its
    clause (clauses are cut at punctuation, conjunctions and a subject pronoun), or the
    clause before it when nothing follows ("the customer link does not"); the words before
    a negation that has a scope are neither (its subject: "SSO is not included in the
    free tier" and "the free tier does not include SSO" negate the same words). A clause
    with a negation followed by "until" or "before" ("not charged until delivery") or by a
    "without" ("cannot export without admin rights") is affirmed. A term is negated
    when it occurs in a scope and in no affirmed clause of the text. A capitalised "The",
    "If", "You"... inside the text starts a clause too (a heading glued to its sentence)."""
    affirmed, negative = _polarity(text)
    return frozenset(affirmed), frozenset(negative - affirmed)


def polarity_disagreement(claim: str, evidence: str) -> bool:
    """A term the one negates and the other affirms ("Goodwill credits require approval"
    against "Goodwill credits need no approval"), unless both negate some of the same
    terms: then they state the same negative ("No approval is needed for refunds under
    €50" against "Refunds under €50 need no approval; larger refunds require approval")
    and the rest is how each places its words around the negation."""
    ca, cn_all = _polarity(claim)
    ea, en_all = _polarity(evidence)
    if cn_all & en_all:
        return False
    cn, en = cn_all - ca, en_all - ea
    return bool((cn & ea) or (en & ca))
