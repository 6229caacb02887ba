"""The typed contracts: label sets, Verdict and CaseRecord (records.jsonl lines)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from raglab.data.record import CaseRecord, read_records
from raglab.data.schema import HumanLabel
from raglab.data.verdicts import (
    CLAIM_LABELS,
    NUGGET_LABELS,
    RELEVANCE_LABELS,
    ClaimLabel,
    Grader,
    Verdict,
)
from raglab.errors import UserError
from raglab.graders.claude import ClaudeGrader
from raglab.graders.heuristic import HeuristicGrader, HeuristicGraderCfg

BASE = {"family": "faithfulness", "grader": "heuristic", "version": "v1", "prompt_hash": "p"}


def test_label_sets():
    assert CLAIM_LABELS == ("SUPPORTED", "CONTRADICTED", "NOT_FOUND")
    assert NUGGET_LABELS == ("YES", "PARTIAL", "NO")
    assert RELEVANCE_LABELS == ("ANSWERS_AS_ASKED", "ADDS_UNNEEDED", "DIFFERENT_QUESTION")
    with pytest.raises(ValidationError, match="not valid for kind 'nugget'"):
        HumanLabel(case_id="c", kind="nugget", answer="a", item="i", label="SUPPORTED")


def test_a_verdict_keeps_only_the_fields_given():
    v = Verdict(**BASE, kind="claim", error=None, item="x", label="SUPPORTED", evidence=None,
                index=0)
    assert v.label is ClaimLabel.SUPPORTED
    assert v.to_json() == {**BASE, "kind": "claim", "error": None, "item": "x",
                           "label": "SUPPORTED", "evidence": None, "index": 0}
    assert json.loads(json.dumps(v.to_json()))["label"] == "SUPPORTED"
    err = Verdict(**BASE, kind="decomposition", error="timeout")
    assert err.to_json() == {**BASE, "kind": "decomposition", "error": "timeout"}


@pytest.mark.parametrize("kind,label", [("claim", "YES"), ("nugget", "SUPPORTED"),
                                        ("rubric", "NO"), ("decomposition", "SUPPORTED")])
def test_a_label_outside_its_kind_is_refused(kind, label):
    with pytest.raises(ValidationError):
        Verdict(**BASE, kind=kind, label=label)


def test_both_graders_satisfy_the_protocol():
    assert isinstance(HeuristicGrader(HeuristicGraderCfg(name="heuristic")), Grader)
    assert isinstance(ClaudeGrader.__new__(ClaudeGrader), Grader)


RECORD = {"case_id": "c1", "tags": {"intent": "x"},
          "gold": {"answerable": True, "grades": [2.0], "nuggets_vital": [True],
                   "has_reference": True, "must_not_contain": []},
          "output": {"case_id": "c1", "answer": "A b c."}, "judgments": {"leaks": []},
          "verdicts": [{**BASE, "kind": "decomposition", "error": None, "claims": ["A b c."]}],
          "graded": True, "metrics": {"final.first_gold_rank": 3, "faithfulness": None},
          "error": None, "n_factual_sentences": 1}


def test_a_record_round_trips_unchanged():
    rec = CaseRecord.model_validate(RECORD)
    assert rec.to_json() == RECORD and list(rec.to_json()) == list(RECORD)
    assert rec.metrics["final.first_gold_rank"] == 3 and rec.verdicts[0].claims == ["A b c."]


def test_read_records_drops_a_torn_line_and_names_a_bad_one(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(RECORD) + "\n" + json.dumps(RECORD)[:30])
    assert [r.case_id for r in read_records(path)] == ["c1"]
    bad = dict(RECORD, gold={"grades": []})
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(UserError, match="case c1: not a raglab record: field 'gold.answerable'"):
        read_records(path)


def test_a_field_that_should_be_an_object_is_named_without_the_model_class():
    """A case's ``user`` given as a string said "Input should be a valid dictionary or
    instance of User" (a class of raglab's code); it says an object is expected."""
    from raglab.data.io import parse_model
    from raglab.data.schema import Case

    case = {"id": "c1", "question": "q?", "answerable": False, "user": "alice"}
    with pytest.raises(UserError) as e:
        parse_model(Case, case, file="cases.jsonl", line=3)
    assert str(e.value) == ("cases.jsonl:3 case c1: field 'user': Input should be an object "
                            "(a JSON mapping of its fields)")
