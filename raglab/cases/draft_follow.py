"""Follow-up turns of drafted cases (``raglab cases draft --follow-ups N``).

For each answerable draft one more request shows the model the drafted question and its
reference answer, the draft's documents and a linked one (:func:`linked`), numbered as for
the first turn, and asks for N follow-up questions. Every follow-up's evidence is copied
from the sentences it cites, as for a draft; a follow-up that cannot be placed or has no
vital nugget is dropped with its reason, and so are the ones after it (they may build on
it). A draft with at least one follow-up left becomes a conversation (docs/cases.md, the
conversation format): turn 1 is the draft, the others ``follow_up: true``; a draft with
none left stays a single-turn case.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from raglab.cache import content_key
from raglab.cases import draft_corpus as dc
from raglab.cases import draft_prompts as dp
from raglab.data.schema import Case, Document, User, matches_filters, may_see
from raglab.llm.client import LLMCallError, LLMRequest
from raglab.secrets import clip_line
from raglab.text.normalize import normalize
from raglab.text.sentences import segments

#: the most follow-ups one draft may ask for (a conversation has at most 20 turns)
MAX_FOLLOW_UPS = 19
#: the fields of a turn, in the order they are written
TURN_FIELDS = ("question", "follow_up", "reference_answer", "evidence", "nuggets",
               "answerable", "tags", "must_not_contain")


@dataclass
class Asked:
    """The follow-up request of one draft."""

    draft: dict[str, Any]
    view: dc.Shown
    request: LLMRequest


def linked(corpus: list[Document], docs: list[Document], user: User | None,
           filters: dict[str, Any], rng: random.Random) -> list[Document]:
    """One document linked to ``docs`` (empty when none): among the documents the draft's
    user may see and its filters let through, one whose metadata differ from the first
    document's in the fewest keys (a sibling of the same product, a region twin), picked
    by ``rng`` among the closest."""
    main = docs[0]
    shown = {d.doc_id for d in docs}
    keys = set(main.metadata)
    best: list[Document] = []
    fewest = None
    for d in corpus:
        if d.doc_id in shown or not may_see(d.acl, user) \
                or not matches_filters(d.metadata, filters) \
                or all(s.heading for s in segments(d.text)):
            continue
        differ = sum(1 for k in keys | set(d.metadata)
                     if d.metadata.get(k) != main.metadata.get(k))
        if differ > 1:
            continue
        if fewest is None or differ < fewest:
            best, fewest = [d], differ
        elif differ == fewest:
            best.append(d)
    return [rng.choice(best)] if best else []


def ask(draft: dict[str, Any], corpus: dict[str, Document], cfg: Any,
        routing: dict[str, Any], n: int, seed: int) -> Asked:
    """The request for ``n`` follow-ups of ``draft`` (deterministic for a seed): its
    documents (not the older version or the twin of a withdrawn_policy or near_duplicate
    draft, whose values are wrong for its user) and a linked one."""
    user = User.model_validate(draft["user"]) if draft.get("user") else None
    filters = draft.get("filters") or {}
    ids = draft["draft"]["documents"]
    if draft["draft"]["kind"] in ("withdrawn_policy", "near_duplicate"):
        ids = ids[:1]
    docs = [corpus[i] for i in ids if may_see(corpus[i].acl, user)
            and matches_filters(corpus[i].metadata, filters)] or [corpus[ids[0]]]
    rng = random.Random(f"{seed}:{draft['id']}")
    docs += linked(list(corpus.values()), docs, user, filters, rng)
    view = dc.shown(docs, cfg.max_doc_chars, rng)
    task = dp.FOLLOW_UP_TASK.format(n=n, question=draft["question"],
                                    answer=draft["reference_answer"])
    metadata = "; ".join(f"Document {chr(65 + i)}: " + ", ".join(
        f"{k}={v}" for k, v in sorted(d.metadata.items())) for i, d in enumerate(docs))
    req = LLMRequest(model=cfg.model, system=dp.SYSTEM,
                     user=dp.USER.format(task=task, metadata=metadata, documents=view.text),
                     max_tokens=cfg.max_tokens * n, purpose="draft",
                     schema=dp.FOLLOW_UP_SCHEMA, **routing)
    return Asked(draft, view, req)


def turns_of(asked: Asked, parsed: dict[str, Any], n: int, near_copy: float
             ) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """``(the follow-up turns kept, [(reason, detail) of each dropped one])``: the turns up
    to the first that cannot be one; that one and the ones after it are dropped."""
    from rapidfuzz import fuzz

    draft = asked.draft
    items = list(parsed.get("follow_ups") or [])[:n]
    seen = [normalize(draft["question"])]
    kept: list[dict[str, Any]] = []
    name = draft["draft"]["documents"][0]  # as a dropped draft is named
    for i, f in enumerate(items):
        where = f"{name} turn {i + 2}"
        question = " ".join(str(f.get("question", "")).split())
        nuggets = [{"text": " ".join(x["text"].split()), "vital": bool(x.get("vital"))}
                   for x in f.get("nuggets") or [] if str(x.get("text", "")).strip()]
        reason = detail = None
        evidence: list[dict[str, Any]] = []
        try:
            evidence = dc.quotes_of(asked.view, f.get("evidence") or [])
        except dc.Unplaceable as e:
            reason, detail = "follow-up evidence not placeable", f"{where}: {e}"
        answer = " ".join(str(f.get("reference_answer") or "").split())
        if reason is None and not question:
            reason, detail = "follow-up without a question", where
        elif reason is None and not answer:  # the history of the next turn needs it
            reason, detail = "follow-up without a reference answer", f"{where}: {question!r}"
        elif reason is None and not any(x["vital"] for x in nuggets):
            reason, detail = "follow-up without a vital nugget", f"{where}: {question!r}"
        elif reason is None and any(fuzz.ratio(normalize(question), q) >= 95 for q in seen):
            reason, detail = "follow-up repeats an earlier question", f"{where}: {question!r}"
        elif reason is None and any(fuzz.ratio(normalize(question), normalize(e["quote"]))
                                    >= near_copy for e in evidence):
            reason, detail = "follow-up copies its evidence", f"{where}: {question!r}"
        turn = {"question": question, "follow_up": True, "reference_answer": answer,
                "evidence": evidence, "nuggets": nuggets, "answerable": True,
                "tags": {"kind": "follow_up"}, "must_not_contain": []}
        if reason is None:
            try:  # a turn is a case without an id, under the draft's user and filters
                Case.model_validate({"id": where, "user": draft.get("user"),
                                     "filters": draft.get("filters") or {},
                                     **{k: v for k, v in turn.items() if k != "follow_up"}})
            except ValidationError as e:
                reason, detail = "invalid follow-up", f"{where}: {clip_line(e, 200)}"
        if reason is not None:
            drops = [(reason, str(detail))]
            drops += [("follow-up after a dropped one", f"{name} turn {j + 2}")
                      for j in range(i + 1, len(items))]
            return kept, drops
        kept.append(turn)
        seen.append(normalize(question))
    return kept, []


def conversation(draft: dict[str, Any], turns: list[dict[str, Any]], n: int,
                 shown: list[str], seed: int) -> dict[str, Any]:
    """The conversation of a draft and its follow-up turns: the draft's user, filters and
    tags (but its kind) for every turn, the kind on each turn, the notes of the draft plus
    ``follow_ups``; the id hashes the turns and the seed, as a draft's does."""
    tags = dict(draft["tags"])
    first = {k: draft[k] for k in TURN_FIELDS if k in draft}
    first["tags"] = {"kind": tags.pop("kind")}
    conv: dict[str, Any] = {"id": ""}
    if draft.get("user"):
        conv["user"] = draft["user"]
    conv.update(filters=draft.get("filters") or {}, tags=tags, turns=[first, *turns])
    conv["id"] = "drafted-" + content_key({k: v for k, v in conv.items() if k != "id"},
                                          seed, length=10)
    conv["needs_review"] = True
    conv["draft"] = {**draft["draft"], "follow_ups": {
        "asked": n, "written": len(turns), "documents": shown}}
    return conv


async def add_follow_ups(drafts: list[dict[str, Any]], corpus: list[Document], cfg: Any,
                         routing: dict[str, Any], llm: Any, n: int, seed: int
                         ) -> tuple[list[dict[str, Any]], list[tuple[str, str]], int]:
    """``(the drafts, each answerable one with follow-ups left a conversation; the drops;
    the follow-up turns written)``."""
    import asyncio

    by_id = {d.doc_id: d for d in corpus}
    todo = [ask(d, by_id, cfg, routing, n, seed) for d in drafts
            if d.get("answerable", True) and d.get("reference_answer")]

    async def one(a: Asked) -> tuple[Asked, dict | None, str | None]:
        try:
            return a, (await llm.complete(a.request, dp.check_follow_ups)).parsed, None
        except LLMCallError as e:
            return a, None, str(e)

    answers = {a.draft["id"]: (a, parsed, error)
               for a, parsed, error in await asyncio.gather(*(one(a) for a in todo))}
    out: list[dict[str, Any]] = []
    drops: list[tuple[str, str]] = []
    written = 0
    for d in drafts:
        if d["id"] not in answers:
            out.append(d)
            continue
        a, parsed, error = answers[d["id"]]
        if error is not None:
            drops.append(("follow-up request failed",
                          f"{d['draft']['documents'][0]}: {error}"))
            out.append(d)
            continue
        turns, dropped = turns_of(a, parsed or {}, n, cfg.near_copy)
        drops += dropped
        if not turns:
            out.append(d)
            continue
        shown = [doc.doc_id for doc in a.view.docs]
        out.append(conversation(d, turns, n, shown, seed))
        written += len(turns)
    return out, drops, written
