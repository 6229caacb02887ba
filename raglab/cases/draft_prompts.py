"""The drafter's prompts and the structured outputs it asks for (``raglab cases draft``).

One request per draft: the system prompt says how users ask and what a case is; the user
message holds the kind's instructions and the numbered sentences of its documents. The
model answers with sentence numbers only; raglab copies the quotes. With ``--follow-ups N``
one more request per answerable draft shows the question and answer drafted and asks for
N follow-up turns (:data:`FOLLOW_UP_TASK`)."""

from __future__ import annotations

from typing import Any

SYSTEM = """You write test questions for a retrieval-augmented question answering system.
Each question must read like a real user typed it into a help search box or a chat: short,
informal, sometimes vague, sometimes with a typo or an acronym, rarely reusing the exact
wording of the document. Never copy a sentence of the document into the question.

You are shown documents whose sentences are numbered [1], [2], ... Cite evidence only by
those numbers: never quote text yourself. The reference answer is one or two sentences. The
nuggets are the facts a correct answer must contain: mark the indispensable ones vital,
the nice-to-have ones not vital. When the documents do not allow a question of the kind
asked for, set found to false and leave the other fields empty."""

KIND_TASK = {
    "lookup": """Kind: lookup.
Write one question whose answer is stated in one or two sentences of Document A.
evidence: those sentence numbers. wrong_value: empty.""",
    "cross_section": """Kind: cross_section.
Write one question whose answer needs facts from two different sections (headings) of
Document A, or, when two documents are shown, from both Document A and Document B.
evidence: the sentence numbers of both parts. wrong_value: empty.""",
    "unanswerable": """Kind: unanswerable.
Write one question a user of Document A's product would plausibly ask, on its topic, whose
answer is NOT in the document (nor implied by it). reference_answer: what a good system
says (that the documentation does not say). evidence: the numbers of the sentences that
come closest (may be empty). nuggets: empty. wrong_value: empty.""",
    "acl_restricted": """Kind: acl_restricted.
Document A is restricted: only some staff may read it. Write one question an outside user
might ask whose answer is only in Document A. reference_answer: a refusal that reveals
nothing of the document. evidence: the numbers of the sentences holding the answer.
nuggets: empty. wrong_value: the restricted value (a short exact phrase copied from those
sentences) that must never reach the outside user.""",
    "withdrawn_policy": """Kind: withdrawn_policy.
Document A is the newer version, Document B the older one it supersedes. Write one question
about a value that changed between them, answered from Document A. evidence: sentence
numbers in Document A only. wrong_value: the outdated value, a short exact phrase copied
from Document B.""",
    "near_duplicate": """Kind: near_duplicate.
Documents A and B are near duplicates for different audiences (metadata shown). Write one
question for Document A's audience about a value in which they differ. evidence: sentence
numbers in Document A only. wrong_value: Document B's value, a short exact phrase copied
from Document B.""",
    "counter_common_knowledge": """Kind: counter_common_knowledge.
Find a fact in Document A that differs from what most people would expect (a default,
limit, fee or rule unlike the common one). Write one question about it. evidence: the
sentence numbers stating it. wrong_value: the commonly expected value (what a model
answering from general knowledge would wrongly say). If there is no such fact, found:
false.""",
}

FOLLOW_UP_TASK = """Follow-ups.
A user asked the question below and was given the reference answer below. Write {n}
follow-up questions the same user types next in the chat, in order, each one answered by
one or two sentences of the documents shown (Document A is the one the first answer came
from; the others are linked to it). Each follow-up must depend on the conversation so far:
use a pronoun or leave words out ("and in the UK?", "how much is it?", "can I change
that?") and never name the product or feature it is about, so that nobody could answer it
without the earlier turns. For each follow-up: question, reference_answer (one or two
sentences), evidence (the sentence numbers holding its answer), nuggets (the facts a
correct answer must contain, the indispensable ones vital). When the documents do not
allow a follow-up, give fewer.

The conversation so far:
User: {question}
Assistant: {answer}"""

USER = """{task}

Metadata of the documents: {metadata}

{documents}"""

PARAPHRASE = """Rewrite this test question the way a real user would type it: keep its
meaning and its answer, but avoid the document's own words ({words}) where a user would
not know them: use everyday words, an acronym, a vague phrase or a typo instead.

Question: {question}
Its answer: {answer}"""


def _obj(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


DRAFT_SCHEMA = _obj({
    "found": {"type": "boolean"},
    "question": {"type": "string"},
    "reference_answer": {"type": "string"},
    "evidence": {"type": "array", "items": {"type": "integer"}},
    "nuggets": {"type": "array", "items": _obj({"text": {"type": "string"},
                                                "vital": {"type": "boolean"}})},
    "wrong_value": {"type": "string"},
})
PARAPHRASE_SCHEMA = _obj({"question": {"type": "string"}})
FOLLOW_UP_SCHEMA = _obj({"follow_ups": {"type": "array", "items": _obj({
    "question": {"type": "string"},
    "reference_answer": {"type": "string"},
    "evidence": {"type": "array", "items": {"type": "integer"}},
    "nuggets": DRAFT_SCHEMA["properties"]["nuggets"],
})}})


def check_draft(parsed: dict) -> None:
    """A structured output of :data:`DRAFT_SCHEMA` (ValueError: ask again)."""
    if not isinstance(parsed.get("found"), bool):
        raise ValueError("found must be a boolean")
    for key in ("question", "reference_answer", "wrong_value"):
        if not isinstance(parsed.get(key, ""), str):
            raise ValueError(f"{key} must be a string")
    ev = parsed.get("evidence", [])
    if not isinstance(ev, list) or not all(isinstance(x, int) and not isinstance(x, bool)
                                           for x in ev):
        raise ValueError("evidence must be a list of sentence numbers")
    nuggets = parsed.get("nuggets", [])
    if not isinstance(nuggets, list) or not all(
            isinstance(n, dict) and isinstance(n.get("text"), str)
            and isinstance(n.get("vital", False), bool) for n in nuggets):
        raise ValueError("nuggets must be a list of {text, vital}")


def check_paraphrase(parsed: dict) -> None:
    if not isinstance(parsed.get("question"), str) or not parsed["question"].strip():
        raise ValueError("question must be a non-empty string")


def check_follow_ups(parsed: dict) -> None:
    """A structured output of :data:`FOLLOW_UP_SCHEMA` (ValueError: ask again)."""
    items = parsed.get("follow_ups")
    if not isinstance(items, list) or not all(isinstance(f, dict) for f in items):
        raise ValueError("follow_ups must be a list of objects")
    for f in items:
        check_draft({"found": True, "wrong_value": "", **f})
