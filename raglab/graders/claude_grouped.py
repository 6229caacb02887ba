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

    items = parsed["decompositions"]
    if not isinstance(items, list) or len(items) != n:
        raise ValueError(f"expected {n} decompositions")
    by_index: dict[int, list[str]] = {}
    for it in items:
        idx = it.get("answer_index") if isinstance(it, dict) else None
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
        cited = "\n".join(f'<sentence index="{n}" passage="{pairs[i][1] + 1}">'
                          f'{" ".join(pairs[i][0].split())}</sentence>'
                          for n, i in enumerate(live, 1))
        req = self._request("context", {"passages": _passages(passages),
                                        "claims": _numbered("claim", claims),
                                        "cited": cited}, _schemas()["context"], True)
        nc, np_ = len(claims), len(live)

        def parse(p: dict) -> list:
            return [parse_items(p, "verdicts", "claim_index", nc, CLAIM_LABELS),
                    parse_items(p, "citation_verdicts", "claim_index", np_, CLAIM_LABELS)]

        res_claims, res_pairs = await self._ask(req, parse)
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
        req = self._request("answer", {"question": question, "answer": answer,
                                       "claims": _numbered("claim", sent),
                                       "nuggets": _numbered("nugget", nuggets)},
                            _schemas()["answer"], True)
        nc, nn = len(sent), len(nuggets)

        def parse(p: dict) -> list:
            return [parse_items(p, "verdicts", "claim_index", nc, CLAIM_LABELS),
                    parse_items(p, "judgments", "nugget_index", nn, NUGGET_LABELS),
                    parse_relevance(p["relevance"])]

        corr, nug, rel = await self._ask(req, parse)
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
        res = await self._ask(req, lambda p: parse_decompositions(p, n, mx))
        for i, claims in zip(live, res):
            out[i] = claims
        return out

    async def decompose_reference(self, question: str, reference: str) -> list[str]:
        return (await self.decompose_references([[question, reference]]))[0]
