"""A case's ``grading_calls`` are listed in a fixed order (the judgments of a case run side
by side and finish in any order), so a resumed or repeated run writes the same record."""

from __future__ import annotations

from raglab.runner.case import _call_order


def test_grading_calls_sort_by_what_they_did_not_by_when_or_how_they_ended():
    a = {"model": "m", "family": "faithfulness", "purpose": "grade", "cached": False,
         "input_tokens": 10}
    b = {"model": "m", "family": "correctness", "purpose": "grade", "cached": True,
         "input_tokens": 99}
    c = {"model": "m", "family": "correctness", "purpose": "grade", "repeat": 1}
    assert sorted([c, a, b], key=_call_order) == [b, a, c]
    assert sorted([b, c, a], key=_call_order) == [b, a, c]
    # a resume that found the call in the cache lists it in the same place
    assert _call_order({**a, "cached": True, "input_tokens": 0}) == _call_order(a)
