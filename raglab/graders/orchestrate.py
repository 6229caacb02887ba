"""Grading one case: ask the grader for its judgments and turn them into verdicts.

Judgments are cached on disk by (family version, judgment, inputs), so re-running an
unchanged configuration repeats no grader work, and any change to the grader (prompt text,
model, settings) changes the version and misses the cache.
"""

from __future__ import annotations

import asyncio
from typing import Any

from raglab.cache import StageCache, content_key
from raglab.data.verdicts import Grader, Verdict
from raglab.graders.spec import FAMILY_PROMPTS
from raglab.llm.client import LLMCallError
from raglab.llm.cost import current_meter, metering
from raglab.text.answers import answer_sentences, citations_of, factual_sentences

#: a grader call that still failed after its retries (the LLM client's error)
GraderCallError = LLMCallError


class Grading:
    def __init__(self, grader: Grader, name: str, versions: dict[str, str], cache: StageCache,
                 work: Any):
        self.grader = grader
        self.name = name
        self.versions = versions
        self.cache = cache
        self.work = work
        prompts = grader.prompt_texts()
        self.prompt_hashes = {fam: content_key("\n".join(prompts.get(p, "") for p in parts),
                                               length=12)
                              for fam, parts in FAMILY_PROMPTS.items()}

    async def _cached(self, family: str, method: str, *args: Any) -> Any:
        key = content_key("judge", self.versions[family], method, args)
        case_meter = current_meter()
        hit = self.cache.get("grade", key)
        if hit is not None:
            self.work.add("grader_cache_hits")
            if case_meter is not None:  # the cost recorded when the judgment was made
                cost = self.cache.get("grade_cost", key)
                case_meter.add(cost["usd"] if cost is not None else
                               0.0 if self.grader.backend == "heuristic" else None)
            return hit
        with metering() as meter:
            value = await getattr(self.grader, method)(*args)
        self.work.add("grader_calls")
        self.cache.put("grade", key, value)
        self.cache.put("grade_cost", key, {"usd": meter.total()})
        if case_meter is not None:
            case_meter.add(meter.total())
        return value

    def _verdict(self, family: str, kind: str, **fields: Any) -> dict[str, Any]:
        """A :class:`~raglab.data.verdicts.Verdict`, in its stored (JSON) form."""
        return Verdict(family=family, kind=kind, grader=self.name,
                       version=self.versions[family], prompt_hash=self.prompt_hashes[family],
                       error=fields.pop("error", None), **fields).to_json()

    async def _family(self, family: str, kind: str, coro, build) -> list[dict[str, Any]]:
        try:
            result = await coro
        except GraderCallError as e:
            return [self._verdict(family, kind, error=str(e)[:500])]
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
            return [self._verdict("correctness", "claim", error=str(e)[:500])]
        return [self._verdict("correctness", "claim", item=c, label=r[0], evidence=r[1], index=i)
                for i, (c, r) in enumerate(zip(ref_claims, res))]

    async def grade(self, case: Any, output: dict[str, Any]) -> tuple[list[dict], int]:
        """Verdicts for one case and the number of factual sentences of its answer (of
        :func:`raglab.text.answers.answer_sentences`, the one split citations index)."""
        answer = output.get("answer")
        if answer is None:
            return [], 0
        q = case.question
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
        jobs = [self._family(
            "faithfulness", "claim", self._cached("faithfulness", "verify", claims, context,
                                                  "faithfulness"),
            claim_verdicts("faithfulness", claims))]
        if case.answerable and case.reference_answer:
            jobs.append(self._correctness(q, case.reference_answer, answer))
        if case.answerable:  # relevance does not apply to unanswerable cases
            jobs.append(self._family(
                "relevance", "rubric", self._cached("relevance", "relevance", q, answer),
                lambda res: [self._verdict("relevance", "rubric", label=res[0],
                                           evidence=res[1])]))
        if case.answerable and case.nuggets:
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
