"""Grading one case: ask the grader for its judgments and turn them into verdicts.

Judgments are cached on disk by (family version, judgment, inputs), so re-running an
unchanged configuration repeats no grader work, and any change to the grader (prompt text,
model, settings) changes the version and misses the cache.

``grader.repeats=N`` asks for N independent judgments: :meth:`Grading.grade` (or
:meth:`Grading.ask`) with ``repeat=r`` sets the repeat of the task it runs in (a context
variable, so the judgments it starts inherit it), and the repeat index is part of the
cache key (repeat 0 keeps the plain key), so a repeat is never answered by another one's
cache. A deterministic grader (``deterministic = True``) is asked once: its repeats agree.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import Any

from raglab.cache import StageCache, content_key
from raglab.components import Grader
from raglab.data.conversation import asked
from raglab.data.verdicts import Verdict, VerdictKind
from raglab.graders.grouped import answer_job, context_job, detached, groups_of, start_references
from raglab.graders.spec import FAMILY_PROMPTS, family_prompt_texts
from raglab.llm.client import LLMCallError
from raglab.llm.cost import current_meter, metering
from raglab.secrets import clip
from raglab.text.answers import answer_sentences, citations_of, factual_sentences

#: a grader call that still failed after its retries (the LLM client's error)
GraderCallError = LLMCallError

#: the independent repeat (grader.repeats) the current grading task asks as
_REPEAT: ContextVar[int] = ContextVar("raglab_grader_repeat", default=0)


class Grading:
    def __init__(self, grader: Grader, name: str, versions: dict[str, str], cache: StageCache,
                 work: Any, repeats: int = 1):
        self.grader = grader
        self.requested_repeats = repeats
        #: independent judgments actually asked for (1 for a deterministic grader)
        self.repeats = 1 if grader.deterministic else repeats
        self._per_repeat: dict[int, Any] = {0: grader}
        self.name = name
        self.versions = versions
        self.cache = cache
        self.work = work
        self.llm: Any = None  # the LLM client the grader calls through (closed with it)
        prompts = grader.prompt_texts()
        self.groups = groups_of(grader)  # grouped calls (raglab.graders.grouped)
        self.fresh: set[str] = set()  # judgments this run cached before the cases asked
        #: judgments a started grouped call will cache: key -> done when it has answered
        #: (a lone reference still unreadable stays, failed: its cases get that error)
        self.pending: dict[str, asyncio.Future] = {}
        self.prompt_hashes = {fam: content_key("\n".join(
            family_prompt_texts(fam, prompts, self.groups).values()), length=12)
            for fam in FAMILY_PROMPTS}

    def _grader(self, repeat: int) -> Any:
        if repeat not in self._per_repeat:
            self._per_repeat[repeat] = self.grader.for_repeat(repeat)
        return self._per_repeat[repeat]

    async def ask(self, family: str, method: str, *args: Any, repeat: int = 0) -> Any:
        """One cached judgment (``method`` of the grader) under ``family``'s version, as
        independent repeat ``repeat``."""
        token = _REPEAT.set(repeat)
        try:
            return await self._cached(family, method, *args)
        finally:
            _REPEAT.reset(token)

    def judgment_key(self, family: str, method: str, args: tuple,
                     also: tuple[str, ...] = ()) -> str:
        """The cache key of a judgment in the current repeat (``also``: other families a
        grouped call answers)."""
        repeat = _REPEAT.get()
        extra = ("repeat", repeat) if repeat else ()
        return content_key("judge", self.versions[family], *(self.versions[f] for f in also),
                           method, args, *extra)

    def start(self, cases: list[Any]) -> asyncio.Future | None:
        """Start the work done once for all the cases (reference answers decomposed several
        per call, when the grader groups them), for every repeat, and return it without
        waiting (None when there is none): a case's grading waits only for the call that
        answers it, so the cases' other calls keep the client's slots busy meanwhile."""
        if "references" not in self.groups:
            return None
        jobs = []
        for repeat in range(self.repeats):
            token = _REPEAT.set(repeat)
            try:
                job = start_references(self, cases, self._grader(repeat))
            finally:
                _REPEAT.reset(token)
            if job is not None:
                jobs.append(job)
        return detached(*jobs) if jobs else None

    async def prepare(self, cases: list[Any]) -> None:
        """:meth:`start`, waiting until all of it is done."""
        job = self.start(cases)
        if job is not None:
            await job

    async def _cached(self, family: str, method: str, *args: Any,
                      also: tuple[str, ...] = ()) -> Any:
        repeat = _REPEAT.get()
        key = self.judgment_key(family, method, args, also)
        case_meter = current_meter()
        pending = self.pending.get(key)
        if pending is not None:  # a started grouped call answers it: wait for that call
            await asyncio.shield(pending)
        hit = self.cache.get("grade", key)
        if hit is not None:
            fresh = key in self.fresh
            if fresh:  # made by this run (a grouped call before the cases)
                self.fresh.discard(key)
            else:
                self.work.add("grader_cache_hits")
            if case_meter is not None:  # the cost (and calls) recorded when it was made
                cost = self.cache.get("grade_cost", key)
                case_meter.add(cost["usd"] if cost is not None else
                               None if self.grader.uses_llm else 0.0)
                case_meter.replay((cost or {}).get("calls"), fresh=fresh)
            return hit
        with metering() as meter:
            value = await getattr(self._grader(repeat), method)(*args)
        for c in meter.calls:  # (the same entries the case's meter lists)
            c.setdefault("family", family)
        self.work.add("grader_calls")
        self.store(key, value, meter.total(), meter.calls)
        if case_meter is not None:
            case_meter.add(meter.total())
        return value

    def store(self, key: str, value: Any, usd: float | None, calls: list[dict]) -> None:
        """Cache a judgment with what it cost and the calls that made it. The cost goes
        first: a judgment counts as cached only once its value is there, so a process
        killed between the two writes leaves a judgment to ask again, never one whose cost
        and calls are lost (its cases' ``grading_calls`` short, their cost unknown)."""
        self.cache.put("grade_cost", key, {"usd": usd, "calls": calls})
        self.cache.put("grade", key, value)

    def _verdict(self, family: str, kind: VerdictKind, **fields: Any) -> dict[str, Any]:
        """A :class:`~raglab.data.verdicts.Verdict`, in its stored (JSON) form."""
        return Verdict(family=family, kind=kind, grader=self.name,
                       version=self.versions[family], prompt_hash=self.prompt_hashes[family],
                       error=fields.pop("error", None), **fields).to_json()

    async def _family(self, family: str, kind: VerdictKind, coro, build) -> list[dict[str, Any]]:
        try:
            result = await coro
        except GraderCallError as e:
            return [self._verdict(family, kind, error=clip(str(e), 500))]
        return build(result)

    async def _correctness(self, question: str, reference: str, answer: str) -> list[dict]:
        """The reference answer's claims, each checked against the answer."""
        try:
            ref_claims = await self._cached("correctness", "decompose", question, reference)
            if not ref_claims:
                ref_claims = [reference.strip()]
            res = await self._cached("correctness", "verify", ref_claims, [answer],
                                     "correctness")
        except GraderCallError as e:
            return [self._verdict("correctness", "claim", error=clip(str(e), 500))]
        return [self._verdict("correctness", "claim", item=c, label=r[0], evidence=r[1], index=i)
                for i, (c, r) in enumerate(zip(ref_claims, res))]

    async def grade(self, case: Any, output: dict[str, Any],
                    repeat: int = 0) -> tuple[list[dict], int]:
        """Verdicts for one case (independent repeat ``repeat``) and the number of factual
        sentences of its answer (of :func:`raglab.text.answers.answer_sentences`, the one
        split citations index)."""
        token = _REPEAT.set(repeat)
        try:
            return await self._grade(case, output)
        finally:
            _REPEAT.reset(token)

    async def _grade(self, case: Any, output: dict[str, Any]) -> tuple[list[dict], int]:
        answer = output.get("answer")
        if answer is None:
            return [], 0
        q = asked(case)  # a turn's question with its conversation so far
        context = [h.get("text") or "" for h in output.get("context", [])]
        verdicts: list[dict] = []
        dec = await self._family(
            "faithfulness", "decomposition", self._cached("faithfulness", "decompose", q, answer),
            lambda claims: [self._verdict("faithfulness", "decomposition", claims=list(claims))])
        verdicts += dec
        if dec[0]["error"]:
            return verdicts, 0
        claims = dec[0]["claims"]
        if not claims:
            return verdicts, 0  # an abstention: scored by the abstention metrics

        def claim_verdicts(family: str, items: list[str]):
            # a third element, when the grader gives it, is the supporting passage's index
            return lambda res: [self._verdict(family, "claim", item=c, label=r[0], evidence=r[1],
                                              index=i, **({"passage": r[2]} if len(r) > 2 else {}))
                                for i, (c, r) in enumerate(zip(items, res))]

        # The judgments below are independent: ask for them together (one batch round).
        jobs: list[Any] = [None if "context" in self.groups else self._family(
            "faithfulness", "claim", self._cached("faithfulness", "verify", claims, context,
                                                  "faithfulness"),
            claim_verdicts("faithfulness", claims))]
        if "answer" in self.groups and case.answerable:  # one call for the answer
            jobs.append(answer_job(self, case, answer))
        elif case.answerable and case.reference_answer:
            jobs.append(self._correctness(q, case.reference_answer, answer))
        if case.answerable and "answer" not in self.groups:  # (relevance: answerable only)
            jobs.append(self._family(
                "relevance", "rubric", self._cached("relevance", "relevance", q, answer),
                lambda res: [self._verdict("relevance", "rubric", label=res[0],
                                           evidence=res[1])]))
        if case.answerable and case.nuggets and "answer" not in self.groups:
            texts = [n.text for n in case.nuggets]
            jobs.append(self._family(
                "nuggets", "nugget", self._cached("nuggets", "nuggets", q, answer, texts),
                lambda res: [self._verdict("nuggets", "nugget", item=t, label=lab, evidence=ev,
                                           index=i, vital=case.nuggets[i].vital)
                             for i, (t, (lab, ev)) in enumerate(zip(texts, res))]))
        sentences = answer_sentences(answer)
        is_factual = set(factual_sentences(answer))
        # one verification per (factual sentence, cited passage) pair
        pairs = sorted({(c["sentence"], p) for c in citations_of(output)
                        for p in c.get("context", [])
                        if c["sentence"] in is_factual and 0 <= p < len(context)})
        if "context" in self.groups:  # claims and pairs in one call for the context
            jobs[0] = context_job(self, claims, pairs, sentences, context, claim_verdicts)
            pairs = []
        for si, pi in pairs:
            sent = sentences[si].text
            jobs.append(self._family(
                "citations", "claim",
                self._cached("citations", "verify", [sent], [context[pi]], "citations"),
                lambda res, si=si, pi=pi, sent=sent: [self._verdict(
                    "citations", "claim", item=sent, label=res[0][0], evidence=res[0][1],
                    sentence=si, passage=pi)]))
        for part in await asyncio.gather(*jobs):
            verdicts += part
        return verdicts, len(is_factual)
