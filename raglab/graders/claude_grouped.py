"""The Claude grader's grouped calls (see :mod:`raglab.graders.grouped`): the requests,
their structured-output schemas and their strict parsing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from raglab.data.verdicts import CLAIM_LABELS, NUGGET_LABELS
from raglab.graders.grouped import GROUP_FAMILIES
from raglab.graders.prompting import (
    RELEVANCE_SCHEMA,
    _items,
    _numbered,
    _obj,
    _passages,
    parse_claims,
    parse_items,
    parse_relevance,
    passage_of,
)

GROUPED_PROMPTS = tuple(GROUP_FAMILIES)


def _schemas() -> dict[str, dict]:

    decomp = {"type": "array", "items": _obj({"answer_index": {"type": "integer"},
                                              "claims": {"type": "array",
                                                         "items": {"type": "string"}}})}
    return {
        "context": _obj({"verdicts": _items("claim_index", CLAIM_LABELS),
                         "citation_verdicts": _items("claim_index", CLAIM_LABELS)}),
        "answer": _obj({"verdicts": _items("claim_index", CLAIM_LABELS),
                        "judgments": _items("nugget_index", NUGGET_LABELS),
                        "relevance": RELEVANCE_SCHEMA}),
        "references": _obj({"decompositions": decomp}),
    }


def parse_decompositions(parsed: dict, n: int, max_claims: int) -> list[list[str]]:
    """The claims of each of ``n`` answers, in index order (a lone one may leave its index
    out); ValueError unless exactly one per index 1..n."""
    items = parsed["decompositions"]
    if not isinstance(items, list) or len(items) != n:
        raise ValueError(f"expected {n} decompositions")
    by_index: dict[int, list[str]] = {}
    for it in items:
        idx = it.get("answer_index", 1 if n == 1 else None) if isinstance(it, dict) else None
        if isinstance(idx, bool) or not isinstance(idx, int) or not 1 <= idx <= n \
                or idx in by_index:
            raise ValueError(f"bad or repeated answer_index: {idx!r}")
        by_index[idx] = parse_claims(it, max_claims)
    return [by_index[i] for i in range(1, n + 1)]


class GroupedCalls:
    """Mixed into :class:`~raglab.graders.claude.ClaudeGrader`."""

    cfg: Any
    prompts: dict[str, str]
    _request: Callable[..., Any]        # the grader's: one structured request
    _ask: Callable[..., Awaitable[Any]]  # the grader's: send it and parse the answer
    #: the grader's: a call of several items, or its items one at a time when unusable
    _ask_items: Callable[..., Awaitable[Any]]

    def groups(self) -> set[str]:
        if self.cfg.verification != "batched":
            return set()
        return {g for g in GROUPED_PROMPTS if g in self.prompts}

    async def judge_context(self, claims: list[str], pairs: list[list[Any]],
                            passages: list[str]) -> list[list[list[Any]]]:
        """``[claim results, pair results]``: per claim ``[label, evidence, passage index]``
        as :meth:`verify` gives it; per ``(sentence, passage index)`` pair ``[label,
        evidence]``, judged against that one passage."""

        claims, pairs = list(claims), [list(p) for p in pairs]
        if not any(p.strip() for p in passages):
            return [[["NOT_FOUND", None, None] for _ in claims],
                    [["NOT_FOUND", None] for _ in pairs]]
        live = [i for i, (_, pi) in enumerate(pairs) if passages[pi].strip()]
        nc, np_ = len(claims), len(live)

        async def ask(cl: list[str], lv: list[int]) -> list:
            cited = "\n".join(f'<sentence index="{n}" passage="{pairs[i][1] + 1}">'
                              f'{" ".join(pairs[i][0].split())}</sentence>'
                              for n, i in enumerate(lv, 1))
            req = self._request("context", {"passages": _passages(passages),
                                            "claims": _numbered("claim", cl),
                                            "cited": cited}, _schemas()["context"], True)

            def parse(p: dict) -> list:
                return [parse_items(p, "verdicts", "claim_index", len(cl), CLAIM_LABELS),
                        parse_items(p, "citation_verdicts", "claim_index", len(lv),
                                    CLAIM_LABELS)]

            return await self._ask(req, parse)

        async def item(i: int) -> list:  # claim i, or cited sentence i - nc, alone
            if i < nc:
                return (await ask([claims[i]], []))[0][0]
            return (await ask([], [live[i - nc]]))[1][0]

        res_claims, res_pairs = await self._ask_items(
            lambda: ask(claims, live), nc + np_, item, lambda rs: [rs[:nc], rs[nc:]])
        out_pairs: list[list[Any]] = [["NOT_FOUND", None] for _ in pairs]
        for i, r in zip(live, res_pairs):
            out_pairs[i] = [r[0], r[1]]
        return [[[lab, ev, passage_of(ev, passages)] for lab, ev in res_claims], out_pairs]

    async def judge_answer(self, question: str, answer: str, ref_claims: list[str],
                           nuggets: list[str]) -> list[Any]:
        """``[correctness results, nugget results, relevance]``: the reference claims checked
        against the answer (as :meth:`verify` with the answer as the one passage), the
        nuggets (as :meth:`nuggets`) and the relevance rubric (as :meth:`relevance`)."""

        ref_claims, nuggets = list(ref_claims), list(nuggets)
        blank = not answer.strip()  # nothing can support a reference claim
        sent = [] if blank else ref_claims
        nc, nn = len(sent), len(nuggets)

        async def ask(cl: list[str], ng: list[str]) -> list:
            req = self._request("answer", {"question": question, "answer": answer,
                                           "claims": _numbered("claim", cl),
                                           "nuggets": _numbered("nugget", ng)},
                                _schemas()["answer"], True)

            def parse(p: dict) -> list:
                return [parse_items(p, "verdicts", "claim_index", len(cl), CLAIM_LABELS),
                        parse_items(p, "judgments", "nugget_index", len(ng), NUGGET_LABELS),
                        parse_relevance(p["relevance"])]

            return await self._ask(req, parse)

        async def item(i: int) -> Any:  # a claim, a nugget, or (last) the relevance alone
            if i < nc:
                return (await ask([sent[i]], []))[0][0]
            if i < nc + nn:
                return (await ask([], [nuggets[i - nc]]))[1][0]
            return (await ask([], []))[2]

        corr, nug, rel = await self._ask_items(
            lambda: ask(sent, nuggets), nc + nn + 1, item,
            lambda rs: [rs[:nc], rs[nc:nc + nn], rs[-1]])
        if blank:
            corr_out: list[list[Any]] = [["NOT_FOUND", None, None] for _ in ref_claims]
        else:
            corr_out = [[lab, ev, passage_of(ev, [answer])] for lab, ev in corr]
        return [corr_out, nug, rel]

    async def decompose_references(self, items: list[list[str]]) -> list[list[str]]:
        """The claims of each ``(question, reference answer)``, several per call."""
        items = [list(i) for i in items]
        live = [i for i, (_, ref) in enumerate(items) if ref.strip()]
        out: list[list[str]] = [[] for _ in items]
        if not live:
            return out
        mx = self.cfg.decomposition.max_claims

        text = "\n".join(f'<item index="{n}">\n<question>\n{items[i][0]}\n</question>\n'
                         f'<answer>\n{items[i][1]}\n</answer>\n</item>'
                         for n, i in enumerate(live, 1))
        req = self._request("references", {"items": text, "max_claims": str(mx)},
                            _schemas()["references"], True)
        n = len(live)
        # unusable: the caller counts it (raglab.graders.grouped asks each of several alone)
        res = await self._ask(req, lambda p: parse_decompositions(p, n, mx))
        for i, claims in zip(live, res):
            out[i] = claims
        return out

    async def decompose_reference(self, question: str, reference: str) -> list[str]:
        """The claims of one reference answer, asked alone (an unusable answer counted as
        an unreadable item)."""
        return (await self._ask_items(
            lambda: self.decompose_references([[question, reference]]), 1, None))[0]
