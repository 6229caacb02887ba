"""Judging one sampled traffic line with the configured grader (through the cached
grading path: the same versions, the same cache as runs)."""

from __future__ import annotations

from typing import Any

from raglab.data.schema import Case
from raglab.graders.orchestrate import GraderCallError, Grading
from raglab.metrics import generation as gen
from raglab.monitor.traffic import TrafficLine


async def judge_line(grading: Grading, line: TrafficLine, n: int) -> tuple[dict[str, Any], bool]:
    """``(reference-free metrics, grader failed)`` of one line."""
    tags = {} if line.session is None else {"conversation": line.session,
                                            "turn": str(line.turn)}
    case = Case(id=line.id or line.case_id or f"traffic-{n}", question=line.question,
                tags=tags)
    output = {"case_id": case.id, "answer": line.answer, "citations": [],
              "candidates": [h.model_dump() for h in line.candidates],
              "context": [h.model_dump() for h in line.context]}
    verdicts, _ = await grading.grade(case, output)
    if any(v.get("error") for v in verdicts):
        return {}, True
    abst = bool(gen.abstained(line.answer, verdicts))
    m: dict[str, Any] = dict(gen.claim_metrics(verdicts, abst))
    m["relevance"] = gen.relevance(verdicts, abst)
    m["reference_free_context_precision"] = None
    dec = [v for v in verdicts if v["kind"] == "decomposition"]
    claims = dec[0].get("claims") if dec else None
    passages = [h.text for h in line.context if h.text.strip()]
    if claims and passages and not abst:
        try:
            supports = []
            for p in passages:  # a passage is precise when it supports a claim of the answer
                # ("context_precision": the request's purpose as the grader and its cache
                # key know it; unchanged so cached judgments stay valid)
                res = await grading.ask("faithfulness", "verify", list(claims), [p],
                                        "context_precision")
                supports.append(any(r[0] == "SUPPORTED" for r in res))
        except GraderCallError:
            return m, True
        m["reference_free_context_precision"] = gen.reference_free_context_precision(supports)
    return m, False
