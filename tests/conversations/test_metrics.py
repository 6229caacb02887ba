"""Conversation-level metrics on hand-built turn records: known answers
(raglab.metrics.conversation)."""

from __future__ import annotations

import pytest

from raglab.metrics.catalog import CONVERSATION_METRICS, FAMILIES, METRICS, spec_of
from raglab.metrics.conversation import (
    conversation_summary,
    flat_metrics,
    follow_up_resolution,
    knowledge_retention,
    nugget_presence,
)
from raglab.metrics.versions import CODE_VERSIONS, conversation_version


def turn(conv, k, n, *, failed=False, recall=None, kind=None, weight=None, **extra):
    """A turn's record as the runner keeps it (diagnosis None: the turn passed)."""
    rec = {"case_id": f"{conv}.t{k}",
           "tags": {"conversation": conv, "turn": str(k),
                    "turn_kind": kind or ("first" if k == 1 else "follow_up")},
           "gold": {"answerable": True},
           "conversation": {"id": conv, "turn": k, "n_turns": n, "history": "reference"},
           "metrics": {"final.evidence_recall": recall}, "error": None,
           "diagnosis": {"primary": "retrieval", "causes": ["retrieval"]} if failed else None}
    if weight is not None:
        rec["weight"] = weight
    rec.update(extra)
    return rec


def nuggets(labels, origin, *, answer="The fee is waived.", graded=True, claims=("x",)):
    """The parts of a full record the retention reads: nugget verdicts and their origin."""
    verdicts = [{"family": "nuggets", "kind": "nugget", "index": i, "label": lab,
                 "grader": "g", "version": "v", "prompt_hash": "h"}
                for i, lab in enumerate(labels)]
    verdicts.append({"family": "faithfulness", "kind": "decomposition", "claims": list(claims),
                     "grader": "g", "version": "v", "prompt_hash": "h"})
    return {"gold": {"answerable": True, "nuggets_vital": [True] * len(labels),
                     "nuggets_from_turn": origin},
            "output": {"answer": answer}, "graded": graded, "verdicts": verdicts}


def test_all_turns_correct_and_first_failing_turn():
    records = [
        turn("a", 1, 3), turn("a", 2, 3), turn("a", 3, 3),                   # passes
        turn("b", 1, 3), turn("b", 2, 3, failed=True), turn("b", 3, 3, failed=True),
        turn("c", 1, 2, failed=True), turn("c", 2, 2),
        turn("d", 2, 2, failed=True), turn("d", 1, 2),                       # out of order
        {"case_id": "single", "tags": {}, "gold": {"answerable": True},     # not a turn
         "metrics": {}, "error": "boom", "diagnosis": {"primary": "error"}},
    ]
    s = conversation_summary(records)
    assert s["n"] == 4 and s["history"] == "reference"
    assert s["all_turns_correct"] == 0.25
    # one key per turn up to the longest conversation, then "none"
    assert s["first_failing_turn"] == {"1": 0.25, "2": 0.5, "3": 0.0, "none": 0.25}


def test_a_turn_passes_by_its_diagnosis_computed_when_the_record_has_none_yet():
    # a record written before diagnoses existed is diagnosed under the default thresholds
    ok = turn("a", 1, 2)
    del ok["diagnosis"]
    leak = turn("a", 2, 2)
    del leak["diagnosis"]
    leak["metrics"]["acl_leak_rate"] = 1.0
    only = turn("a", 1, 1)  # (ok alone: its turn 2 not in the run, not known)
    del only["diagnosis"]
    assert conversation_summary([only])["all_turns_correct"] == 1.0
    assert conversation_summary([ok, leak])["all_turns_correct"] == 0.0
    assert conversation_summary([ok, leak])["first_failing_turn"]["2"] == 1.0


def test_weights_weigh_conversations_by_their_turns_mean():
    records = [turn("a", 1, 1, weight=3.0), turn("b", 1, 1, failed=True, weight=1.0)]
    s = conversation_summary(records)
    assert s["all_turns_correct"] == 0.75
    assert s["first_failing_turn"] == {"1": 0.25, "none": 0.75}


def test_no_turn_no_section():
    assert conversation_summary([]) is None
    assert conversation_summary([{"case_id": "x", "tags": {}, "metrics": {}}]) is None


def test_knowledge_retention_counts_yes_over_the_from_turn_nuggets():
    r1 = {**turn("a", 2, 2), **nuggets(["YES", "YES", "NO"], [None, 1, 1])}
    r2 = {**turn("b", 3, 3), **nuggets(["PARTIAL", "YES"], [2, 1])}
    assert nugget_presence(r1) == [True, False]
    assert nugget_presence(r2) == [False, True]      # PARTIAL is not present
    assert knowledge_retention([r1, r2]) == 0.5
    # a refusal of an answerable turn misses every fact
    refused = {**turn("c", 2, 2), **nuggets(["NO", "NO"], [1, None], answer="I do not know.",
                                            claims=())}
    assert nugget_presence(refused) == [False]
    assert knowledge_retention([r1, r2, refused]) == pytest.approx(2 / 5)
    # weighted by the turn
    heavy = {**r1, "weight": 3.0}
    assert knowledge_retention([heavy, r2]) == pytest.approx((3 * 1 + 1) / (3 * 2 + 2))


def test_knowledge_retention_is_null_without_a_graded_from_turn_nugget():
    plain = {**turn("a", 2, 2), **nuggets(["YES"], [None])}
    ungraded = {**turn("b", 2, 2), **nuggets(["YES"], [1], graded=False)}
    no_answer = {**turn("c", 2, 2), **nuggets(["YES"], [1], answer=None)}
    failed_judge = {**turn("d", 2, 2), **nuggets(["YES"], [1])}
    failed_judge["verdicts"][0] = {**failed_judge["verdicts"][0], "error": "timeout"}
    for r in (plain, ungraded, no_answer, failed_judge):
        assert nugget_presence(r) is None, r["case_id"]
    assert knowledge_retention([plain, ungraded, no_answer, failed_judge]) is None
    s = conversation_summary([plain, ungraded])
    assert s["knowledge_retention"] is None and "knowledge_retention" in s
    # the runner's in-memory form carries the flags as computed from the full record
    assert nugget_presence({"nugget_presence": [True, False]}) == [True, False]


def test_follow_up_resolution_is_the_ratio_of_the_mean_recalls():
    records = [turn("a", 1, 3, recall=1.0), turn("a", 2, 3, recall=0.5),
               turn("a", 3, 3, recall=0.0, kind="topic_shift"),
               turn("b", 1, 2, recall=0.5), turn("b", 2, 2, recall=0.0),
               turn("c", 1, 2, recall=None), turn("c", 2, 2, recall=None)]
    assert follow_up_resolution(records) == {"follow_up_recall": 0.25, "first_recall": 0.75,
                                             "ratio": pytest.approx(1 / 3)}
    s = conversation_summary(records)
    assert flat_metrics(s) == {"conversation.all_turns_correct": 1.0,
                               "conversation.knowledge_retention": None,
                               "conversation.follow_up_resolution": pytest.approx(1 / 3)}


def test_follow_up_resolution_is_null_when_a_group_is_empty_or_first_recall_zero():
    only_first = [turn("a", 1, 1, recall=1.0)]
    assert follow_up_resolution(only_first) == {"follow_up_recall": None, "first_recall": 1.0,
                                                "ratio": None}
    zero = [turn("a", 1, 2, recall=0.0), turn("a", 2, 2, recall=1.0)]
    assert follow_up_resolution(zero) == {"follow_up_recall": 1.0, "first_recall": 0.0,
                                          "ratio": None}


def test_declared_once_with_a_family_version_kept_out_of_metric_versions():
    assert CONVERSATION_METRICS == ("conversation.all_turns_correct",
                                    "conversation.knowledge_retention",
                                    "conversation.follow_up_resolution")
    for name in CONVERSATION_METRICS:
        assert spec_of(name) is METRICS[name] and METRICS[name].family == "conversation"
        assert METRICS[name].reported_by == ("conversations",)
    # not a per-case metric and not in every run's metric_versions
    assert "conversation" not in FAMILIES and CODE_VERSIONS["conversation"] == 2
    v = {"diagnosis": "d1", "nuggets": "n1", "retrieval": "r1"}
    assert conversation_version(v) == conversation_version(dict(v))
    assert conversation_version(v) != conversation_version({**v, "diagnosis": "d2"})


def test_a_quarantined_turn_before_the_first_failing_one_leaves_its_conversation_out():
    """A conversation whose only failing turn (2) was quarantined counted as all turns
    correct: quarantining a failing turn raised the figure. Now a turn not in the run
    before any failing turn leaves the conversation out of both shares (its first failing
    turn is not known); a failing turn before the gap still counts."""
    records = [turn("a", 1, 2),                                  # t2 quarantined
               turn("b", 1, 3, failed=True),                      # t2 quarantined: known
               turn("b", 3, 3),
               turn("c", 1, 2), turn("c", 2, 2, failed=True),
               turn("d", 1, 1)]
    s = conversation_summary(records)
    assert s["all_turns_correct"] == pytest.approx(1 / 3)  # (was 0.5: a as correct)
    assert (s["n"], s["n_incomplete"]) == (4, 1)
    assert s["first_failing_turn"] == pytest.approx({"1": 1 / 3, "2": 1 / 3, "3": 0.0,
                                                     "none": 1 / 3})
    # every conversation incomplete: no share, not a share of 1
    s = conversation_summary([turn("a", 2, 2)])
    assert s["n_incomplete"] == 1 and s["all_turns_correct"] is None
