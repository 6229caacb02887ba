"""Grouped grader calls (``verification: batched``): fewer requests, the same verdicts.

Three prompts join judgments that need the same input into one structured call:
- ``context.txt``: the answer's claims (faithfulness) and every (cited sentence, cited
  passage) pair (citations), one call for the context; each pair is still judged against its
  one passage;
- ``answer.txt``: the reference claims (correctness), the nuggets and relevance, one call for
  the answer;
- ``references.txt``: reference answers decomposed several at a time, started before the
  cases are graded (a case waits only for the call with its reference, so the other cases'
  calls fill the client's slots meanwhile); each decomposition is cached per case (it does
  not depend on the system under test, so every later run and sweep job reuses it). A call
  of several references whose answers are unusable leaves each of its cases to ask for its
  own reference alone; a call of one is not asked again (its case's correctness is an error).

A grader offers them with ``groups()`` (the prompt names it has); a family whose prompt is
missing keeps its separate calls. The grouped prompts are part of the families' versions.
"""

from __future__ import annotations

from typing import Any

from raglab.data.conversation import asked
from raglab.secrets import clip

#: grouped prompt -> the metric families whose verdicts it gives
GROUP_FAMILIES = {
    "context": ("faithfulness", "citations"),
    "answer": ("correctness", "nuggets", "relevance"),
    "references": ("correctness",),
}
#: references decomposed per call
REFERENCES_PER_CALL = 8


def family_groups(family: str, available: set[str] | frozenset[str]) -> list[str]:
    """The grouped prompts (of ``available``) a family's verdicts depend on."""
    return [g for g, fams in GROUP_FAMILIES.items() if family in fams and g in available]


def groups_of(grader: Any) -> frozenset[str]:
    fn = getattr(grader, "groups", None)
    return frozenset(fn()) if fn is not None else frozenset()


def reference_items(cases: list[Any]) -> list[tuple[str, str]]:
    """``(question, reference)`` of the cases whose reference answer is decomposed."""
    seen: dict[tuple[str, str], None] = {}
    for c in cases:
        if c.answerable and c.reference_answer:
            seen.setdefault((asked(c), c.reference_answer), None)
    return list(seen)


async def context_job(g: Any, claims: list[str], pairs: list[tuple[int, int]],
                      sentences: list[Any], context: list[str], claim_verdicts: Any) -> list:
    """Faithfulness and citation verdicts of one answer from one call for the context."""
    from raglab.llm.client import LLMCallError

    items = [[sentences[si].text, pi] for si, pi in pairs]
    try:
        res_claims, res_pairs = await g._cached("faithfulness", "judge_context", claims, items,
                                                context, also=("citations",))
    except LLMCallError as e:
        out = [g._verdict("faithfulness", "claim", error=clip(str(e), 500))]
        if pairs:
            out.append(g._verdict("citations", "claim", error=clip(str(e), 500)))
        return out
    out = claim_verdicts("faithfulness", claims)(res_claims)
    out += [g._verdict("citations", "claim", item=item[0], label=r[0], evidence=r[1],
                       sentence=si, passage=pi)
            for (si, pi), item, r in zip(pairs, items, res_pairs)]
    return out


async def answer_job(g: Any, case: Any, answer: str) -> list:
    """Correctness, relevance and nugget verdicts of one answer from one call for the answer
    (the reference's claims come from the cache the references call filled)."""
    from raglab.llm.client import LLMCallError

    q, ref = asked(case), case.reference_answer
    out: list = []
    ref_claims: list[str] = []
    if ref:
        try:
            ref_claims = await g._cached("correctness", "decompose_reference", q, ref)
            if not ref_claims:
                ref_claims = [ref.strip()]
        except LLMCallError as e:
            out.append(g._verdict("correctness", "claim", error=clip(str(e), 500)))
            ref = None  # the other two judgments go on
    texts = [n.text for n in case.nuggets]
    try:
        corr, nug, rel = await g._cached("correctness", "judge_answer", q, answer, ref_claims,
                                         texts, also=("nuggets", "relevance"))
    except LLMCallError as e:
        err = clip(str(e), 500)
        out += [g._verdict(f, kind, error=err) for f, kind, on in (
            ("correctness", "claim", bool(ref)), ("relevance", "rubric", True),
            ("nuggets", "nugget", bool(texts))) if on]
        return out
    if ref:
        out += [g._verdict("correctness", "claim", item=c, label=r[0], evidence=r[1], index=i)
                for i, (c, r) in enumerate(zip(ref_claims, corr))]
    out.append(g._verdict("relevance", "rubric", label=rel[0], evidence=rel[1]))
    out += [g._verdict("nuggets", "nugget", item=t, label=lab, evidence=ev, index=i,
                       vital=case.nuggets[i].vital)
            for i, (t, (lab, ev)) in enumerate(zip(texts, nug))]
    return out


def start_references(g: Any, cases: list[Any], grader: Any = None) -> Any:
    """Start decomposing the reference answers not in the cache yet, several per call, each
    cached under its case's key; return the job (None when nothing is left to do) without
    waiting for it. Until its call has answered, a key is pending in ``g.pending``: a case
    that needs it waits for that call instead of asking again. A failed call leaves its
    cases to decompose one by one."""
    import asyncio

    from raglab.graders.fallback import note
    from raglab.llm.client import LLMCallError, LLMFormatError
    from raglab.llm.cost import metering

    keys = {it: g.judgment_key("correctness", "decompose_reference", it)
            for it in reference_items(cases)}
    todo = [it for it, k in keys.items()
            if k not in g.pending and g.cache.get("grade", k) is None]
    if not todo:
        return None
    loop = asyncio.get_running_loop()
    for it in todo:
        g.pending[keys[it]] = loop.create_future()

    async def one(chunk: list[tuple[str, str]]) -> None:
        failed: BaseException | None = None
        live = [it for it in chunk if it[1].strip()]
        unreadable: LLMFormatError | None = None
        try:
            with metering() as meter:
                res = await (grader or g.grader).decompose_references([list(c) for c in chunk])
            g.work.add("grader_calls", len(chunk))  # one judgment per reference
            total = meter.total()
            share = round(total / len(chunk), 9) if total is not None else None
            # each case lists the call with its share: one of the references it answered
            calls = [{**c, "family": "correctness", "share": 1 / len(chunk),
                      "served": len(chunk)} for c in meter.calls]
            for it, claims in zip(chunk, res):
                g.store(keys[it], claims, share, calls)
                g.fresh.add(keys[it])
        except LLMFormatError as e:
            llm = getattr(grader or g.grader, "llm", None)
            if len(live) > 1:  # unusable answers: each case asks for its own alone
                note(llm, "single_item_calls", len(live))
            else:  # asked alone already: its case's judgment is this error
                note(llm, "unreadable_items")
                unreadable = e
        except LLMCallError:
            pass
        except BaseException as e:  # the cases waiting for it fail as the call did
            failed = e
            raise
        finally:
            for it in chunk:
                # a lone reference still unreadable stays pending, failed: its cases (even
                # those that ask after this call ended) get its error, not ask again
                kept = unreadable is not None and it in live
                fut = g.pending.get(keys[it]) if kept else g.pending.pop(keys[it], None)
                if fut is None or fut.done():
                    continue
                if kept:
                    fut.set_exception(unreadable)
                    fut.exception()  # retrieved: no warning when no case waits for it
                elif failed is None or isinstance(failed, asyncio.CancelledError):
                    fut.set_result(None)  # answered, failed or cancelled: look in the cache
                else:
                    fut.set_exception(failed)
                    fut.exception()  # retrieved: no warning when no case waits for it

    n = REFERENCES_PER_CALL
    return detached(*(one(todo[i:i + n]) for i in range(0, len(todo), n)))


def detached(*jobs: Any) -> Any:
    """``asyncio.gather`` of jobs started and not necessarily awaited: its outcome is
    retrieved when it ends, so an error nobody awaits is no "never retrieved" warning."""
    import asyncio

    job = asyncio.gather(*jobs)
    job.add_done_callback(lambda f: f.cancelled() or f.exception())
    return job
