"""Conversation-level metrics: pure functions of a run's turn records (docs/metrics.md,
Conversation metrics).

A conversation's turns are ordinary cases (raglab.data.conversation), so every per-case
metric is already reported per turn, and per ``turn`` / ``turn_kind`` slice. What a turn
cannot say on its own is computed here, over the records that carry a ``conversation``
(``{id, turn, n_turns, history}``; a record without one is a single-turn case and is
ignored):

- ``conversation.all_turns_correct``: the share of conversations whose every turn passes.
  A turn *passes* when it has no diagnosis (raglab.metrics.diagnosis: the one definition
  of a failed case, under the run's ``diagnosis`` thresholds): no error, no ACL leak, no
  forbidden string, evidence in the candidates and the context, no false refusal of an
  answerable turn, no answer to an unanswerable one, a faithful answer, and every vital
  nugget present where the grader judged them.
- ``first_failing_turn``: the share of conversations whose first failing turn is 1, 2, ...
  and ``none`` (every turn passed): one key per turn up to the longest conversation.
  Both figures leave out a conversation with a turn not in the run (quarantined) before
  its first failing turn (counted in ``n_incomplete``): that turn might have failed.
- ``conversation.knowledge_retention``: over the nuggets that carry ``from_turn`` (a fact
  the user stated earlier), the share the grader judged present (``YES``; a ``PARTIAL``
  counts as missing, as for ``all_vital_present``; a refusal of an answerable turn misses
  them all). ``None`` when no such nugget was graded.
- ``conversation.follow_up_resolution``: the mean ``final.evidence_recall`` of the
  ``follow_up`` turns over that of the ``first`` turns (both given too); ``None`` when
  either group has no turn where the recall applies, or the first turns' recall is 0.

Weights: a turn's ``weight`` weighs its nuggets and its recall; a conversation weighs the
mean of its turns' weights (the conversation's ``weight`` when no turn overrides it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from raglab.metrics.declaration import MetricSpec, Reporter

#: reported once per run, in ``metrics.json`` (``conversations`` and ``overall``)
_RUN_LEVEL: tuple[Reporter, ...] = ("conversations",)

ALL_TURNS_CORRECT = "conversation.all_turns_correct"
KNOWLEDGE_RETENTION = "conversation.knowledge_retention"
FOLLOW_UP_RESOLUTION = "conversation.follow_up_resolution"

DECLARED: tuple[MetricSpec, ...] = (
    MetricSpec(ALL_TURNS_CORRECT, "conversation", "higher", "share", None,
               "share of conversations whose every turn passes (no diagnosis); "
               "one value per run", reported_by=_RUN_LEVEL),
    MetricSpec(KNOWLEDGE_RETENTION, "conversation", "higher", "share", None,
               "share of the nuggets with `from_turn` (facts the user stated earlier) "
               "judged YES; null when none was graded", judged="nugget",
               reported_by=_RUN_LEVEL),
    MetricSpec(FOLLOW_UP_RESOLUTION, "conversation", "higher", "ratio", None,
               "mean `final.evidence_recall` of follow-up turns over that of first turns "
               "(1: follow-ups retrieve as well as first turns); null when either is "
               "missing", reported_by=_RUN_LEVEL),
)

_PRESENT = "YES"


def turn_of(record: Mapping[str, Any]) -> tuple[str, int] | None:
    """``(conversation id, turn)`` of a turn's record; None for a single-turn case."""
    conv = record.get("conversation")
    if not isinstance(conv, Mapping) or conv.get("id") is None:
        return None
    return str(conv["id"]), int(conv["turn"])


def nugget_presence(record: Mapping[str, Any]) -> list[bool] | None:
    """For each nugget with ``from_turn`` (``gold.nuggets_from_turn``), whether the grader
    judged it present (``YES``), in nugget order; None when the turn's nuggets were not
    graded (no answer, no grading, a failed judge, an unanswerable turn). A record that
    carries ``nugget_presence`` (the runner's in-memory form) gives it as it is."""
    if "nugget_presence" in record:
        return record["nugget_presence"]
    gold = record.get("gold") or {}
    origin = gold.get("nuggets_from_turn")
    if not origin or not any(t is not None for t in origin) or not gold.get("answerable", True):
        return None
    answer = (record.get("output") or {}).get("answer")
    if answer is None or not record.get("graded"):
        return None
    from raglab.metrics import generation as gen

    verdicts = record.get("verdicts") or []
    if gen.decomposition_failed(verdicts):
        return None
    keep = [i for i, t in enumerate(origin) if t is not None]
    if gen.abstained(answer, verdicts):
        return [False] * len(keep)
    vs = [v for v in verdicts if v.get("family") == "nuggets" and v.get("kind") == "nugget"]
    if len(vs) != len(origin) or any(v.get("error") for v in vs):
        return None
    labels = [v.get("label") for v in sorted(vs, key=lambda v: v.get("index") or 0)]
    return [labels[i] == _PRESENT for i in keep]


def _mean(pairs: Sequence[tuple[float, float]]) -> float | None:
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if pairs and total > 0 else None


def _passed(record: Mapping[str, Any]) -> bool:
    from raglab.metrics.diagnosis import diagnosis_of

    return diagnosis_of(record) is None


def _first_failing(turns: Mapping[int, Mapping[str, Any]], n_turns: int) -> str | None:
    """The first failing turn of a conversation (``"none"``: every turn passed), or None
    when a turn before it is not in the run (quarantined): whether that turn would have
    passed is not known, so neither is the conversation's first failing turn."""
    for k in range(1, n_turns + 1):
        if k not in turns:
            return None
        if not _passed(turns[k]):
            return str(k)
    return "none"


def conversation_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """metrics.json's ``conversations`` section (module docstring), or None when no record
    is a conversation's turn: ``{n, n_incomplete, history, all_turns_correct,
    first_failing_turn, knowledge_retention, follow_up_resolution: {follow_up_recall,
    first_recall, ratio}}``. ``n_incomplete`` conversations have a turn not in the run
    (quarantined) before any failing turn: they are left out of ``all_turns_correct`` and
    ``first_failing_turn`` (a failing turn quarantined would have made them pass)."""
    convs: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    histories: set[str] = set()
    for r in records:
        where = turn_of(r)
        if where is None:
            continue
        convs.setdefault(where[0], []).append((where[1], r))
        histories.add(str(r["conversation"].get("history") or "reference"))
    if not convs:
        return None
    longest = 0
    incomplete = 0
    weight_by_first_fail: dict[str, float] = {}  # "none": every turn passed
    for turns in convs.values():
        turns.sort(key=lambda tr: tr[0])
        n_turns = max(int(r["conversation"].get("n_turns") or t) for t, r in turns)
        longest = max(longest, n_turns)
        w = sum(float(r.get("weight", 1.0)) for _, r in turns) / len(turns)
        failing = _first_failing(dict(turns), n_turns)
        if failing is None:  # a turn not in the run before any failing one: not known
            incomplete += 1
            continue
        weight_by_first_fail[failing] = weight_by_first_fail.get(failing, 0.0) + w
    total = sum(weight_by_first_fail.values())
    shares = {k: (weight_by_first_fail.get(k, 0.0) / total if total > 0 else None)
              for k in [*map(str, range(1, longest + 1)), "none"]}
    return {"n": len(convs), "n_incomplete": incomplete, "history": "/".join(sorted(histories)),
            "all_turns_correct": shares["none"], "first_failing_turn": shares,
            "knowledge_retention": knowledge_retention(records),
            "follow_up_resolution": follow_up_resolution(records)}


def knowledge_retention(records: Sequence[Mapping[str, Any]]) -> float | None:
    """The share of graded ``from_turn`` nuggets judged present (weighted by their turn)."""
    pairs = [(1.0 if ok else 0.0, float(r.get("weight", 1.0)))
             for r in records if turn_of(r) is not None
             for ok in (nugget_presence(r) or [])]
    return _mean(pairs)


def _recall(records: Sequence[Mapping[str, Any]], kind: str) -> float | None:
    pairs = [(float(v), float(r.get("weight", 1.0))) for r in records
             if turn_of(r) is not None and (r.get("tags") or {}).get("turn_kind") == kind
             and (v := (r.get("metrics") or {}).get("final.evidence_recall")) is not None]
    return _mean(pairs)


def follow_up_resolution(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{follow_up_recall, first_recall, ratio}``: the mean ``final.evidence_recall`` of
    follow-up and first turns, and their ratio (None where it cannot be formed)."""
    follow, first = _recall(records, "follow_up"), _recall(records, "first")
    ratio = follow / first if follow is not None and first else None
    return {"follow_up_recall": follow, "first_recall": first, "ratio": ratio}


def flat_metrics(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The section's per-run figures as ``overall`` metrics (MLflow logs the non-null ones)."""
    return {ALL_TURNS_CORRECT: summary["all_turns_correct"],
            KNOWLEDGE_RETENTION: summary["knowledge_retention"],
            FOLLOW_UP_RESOLUTION: summary["follow_up_resolution"]["ratio"]}
