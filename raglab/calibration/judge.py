"""Asking the configured grader about every human label, through the cached grading path.

Claims are verified in groups that share a case, an answer and a context, in file order,
as ``raglab run`` verifies the claims of one answer against its context (same method, same
arguments, same cache key); nuggets are judged per case and answer. Each independent
repeat (``grader.repeats``) asks again under its own cache key; a deterministic grader is
asked once.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from raglab.calibration.labels import LabelLine
from raglab.graders.orchestrate import GraderCallError, Grading
from raglab.secrets import clip


async def judge_labels(grading: Grading, labels: list[LabelLine],
                       questions: dict[str, str]) -> tuple[list[list[str | None]], list[str]]:
    """``(labels per item per repeat, errors)``; an item whose call failed has None."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, ll in enumerate(labels):
        lab = ll.label
        if lab.kind == "claim":
            groups[("claim", lab.case_id, lab.answer, tuple(lab.context))].append(i)
        else:
            groups[("nugget", lab.case_id, lab.answer)].append(i)
    out: list[list[str | None]] = [[None] * grading.repeats for _ in labels]
    errors: list[str] = []

    async def one(key: tuple, idx: list[int], repeat: int) -> None:
        items = [labels[i].label.item for i in idx]
        try:
            if key[0] == "claim":
                res: Any = await grading.ask("faithfulness", "verify", items, list(key[3]),
                                             "faithfulness", repeat=repeat)
            else:
                res = await grading.ask("nuggets", "nuggets", questions.get(key[1], ""),
                                        key[2], items, repeat=repeat)
        except GraderCallError as e:
            errors.append(clip(f"case {key[1]} ({key[0]}s, repeat {repeat}): {e}", 500))
            return
        for i, judged in zip(idx, res):  # [label, evidence, ...] per item
            out[i][repeat] = judged[0]

    await asyncio.gather(*(one(k, idx, r) for k, idx in groups.items()
                           for r in range(grading.repeats)))
    return out, errors
