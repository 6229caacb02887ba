"""Case drafts from a run's failures or from production traffic (JSON Lines).

A draft is a case (the fields of the cases file) plus ``draft`` (what it came from: the
question's answer, its context, why it was picked; ignored by ``raglab cases add``) and,
when its labels are still to be written, ``needs_labels: true`` (refused by ``add``).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from raglab.data.conversation import turn_id
from raglab.errors import UserError
from raglab.metrics.diagnosis import CAUSES, DiagnosisCfg, diagnosis_of, failed
from raglab.secrets import clip, clip_line
from raglab.text.normalize import normalize


def failure_reasons(record: dict[str, Any], cfg: DiagnosisCfg | None = None) -> list[str]:
    """Why a run's record counts as a failure (empty: it passed). Pure.

    A case failed when it has a diagnosis (:func:`raglab.metrics.diagnosis.failed`, the
    run's "failed cases: N"): one reason per cause of it, in the diagnosis's order, with
    the figures behind it. ``cfg``: the thresholds for a record written before diagnoses
    existed (the defaults when None)."""
    d = diagnosis_of(record, cfg)
    if d is None:
        return []
    cfg = cfg or DiagnosisCfg()
    m = record.get("metrics") or {}
    out: list[str] = []
    for cause in d.get("causes") or [d.get("primary")]:
        reason = _REASONS.get(cause)  # a cause this version does not know: its name
        out += (reason(record, m, cfg) if reason else []) or [str(cause).replace("_", " ")]
    return out


def _f(m: dict[str, Any], name: str) -> str:
    return f"{name} {m[name]:.2f}" if m.get(name) is not None else f"{name} n/a"


def _error(rec: dict[str, Any], m: dict[str, Any], cfg: DiagnosisCfg) -> list[str]:
    return [f"error: {clip_line(rec.get('error'), 200)}"]


def _retrieval(rec: dict[str, Any], m: dict[str, Any], cfg: DiagnosisCfg) -> list[str]:
    return [f"gold evidence not in the candidates ({_f(m, 'candidate.evidence_recall')})"]


def _reranking(rec: dict[str, Any], m: dict[str, Any], cfg: DiagnosisCfg) -> list[str]:
    return [(f"evidence in the candidates did not reach the final context "
             f"({_f(m, 'final.evidence_recall')}, {_f(m, 'candidate.evidence_recall')})")]


def _generation(rec: dict[str, Any], m: dict[str, Any], cfg: DiagnosisCfg) -> list[str]:
    out = []
    if (m.get("contradicted_claim_rate") or 0) > cfg.max_contradicted:
        out.append(f"contradicted claims ({_f(m, 'contradicted_claim_rate')})")
    if m.get("faithfulness") is not None and m["faithfulness"] < cfg.min_faithfulness:
        out.append(f"unsupported claims ({_f(m, 'faithfulness')})")
    if m.get("must_not_contain_rate") == 1.0:
        out.append("the answer contains a forbidden string (must_not_contain)")
    return out


def _incomplete(rec: dict[str, Any], m: dict[str, Any], cfg: DiagnosisCfg) -> list[str]:
    out = [(f"faithful, evidence in the context, but facts missing "
            f"({_f(m, 'vital_nugget_recall').replace('_', ' ')}, "
            f"{_f(m, 'nugget_recall').replace('_', ' ')}): a cautious model or a "
            "truncated context")]
    nuggets = [v for v in rec.get("verdicts") or []
               if v.get("family") == "nuggets" and v.get("label") in ("NO", "PARTIAL")]
    for vital, what in ((True, "vital nugget"), (False, "other nugget")):
        missing = [v.get("item") for v in nuggets if bool(v.get("vital")) is vital]
        if missing:
            out.append(f"{what} missing: {clip('; '.join(str(x) for x in missing), 200)}")
    return out


def _wrong(rec: dict[str, Any], m: dict[str, Any], cfg: DiagnosisCfg) -> list[str]:
    return [(f"faithful, complete and with the evidence in the context, but wrong against "
             f"the reference (correctness {_f(m, 'correctness')}): check the corpus for "
             "stale or conflicting documents")]


_REASONS = {
    "error": _error,
    "retrieval": _retrieval,
    "reranking_or_k": _reranking,
    "false_refusal": lambda *_: ["false refusal: no answer to an answerable question"],
    "hallucinated_answer": lambda *_: ["false answer: answered an unanswerable question"],
    "generation": _generation,
    "incomplete_answer": _incomplete,
    "stale_or_conflicting_corpus": _wrong,
    "access_control": lambda *_: [("acl leak: a document the user may not see was "
                                   "retrieved (severity one)")],
}
assert tuple(_REASONS) == CAUSES


def _passages(hits: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [{"doc_id": h.get("doc_id"), "text": h.get("text", "")} for h in (hits or [])]


def drafts_from_run(run_dir: Path) -> tuple[list[dict[str, Any]], int]:
    """``(drafts of the failing cases, records read)``; each draft is the case as the run's
    cases file has it (labels included), plus ``draft``; a conversation's failing turns are
    one draft, the conversation up to the last of them (:func:`_into_conversation`)."""
    records_path = run_dir / "records.jsonl"
    if not records_path.is_file():
        raise UserError(f"{run_dir}: not a run directory (records.jsonl is missing)")
    cases_file = None
    diag = DiagnosisCfg()
    try:
        from raglab.data.dataset import resolve_path
        from raglab.data.yaml_io import load_yaml_file

        cfg = load_yaml_file(run_dir / "config.yaml") or {}
        diag = _diagnosis_cfg(cfg)
        cases_file = resolve_path(cfg["dataset"]["cases"])
    except (OSError, KeyError, TypeError, AttributeError, UserError, ValueError):
        pass  # drafts of cases that cannot be found carry needs_labels
    from raglab.data.record import RecordLines

    drafts: list[dict[str, Any]] = []
    n = 0
    for lineno, _, rec in RecordLines(records_path):  # streamed: only the failures are kept
        n += 1
        cid = rec.get("case_id")
        if not isinstance(cid, str):
            raise UserError("a record without a case_id", file=str(records_path), line=lineno)
        if not failed(rec, diag):
            continue
        output = rec.get("output") or {}
        drafts.append({
            "from": "run", "run_dir": str(run_dir), "case_id": cid,
            "cases_file": str(cases_file) if cases_file else None,
            "reasons": failure_reasons(rec, diag),
            "answer": output.get("answer"), "context": _passages(output.get("context")),
            "contradicted_claims": rec.get("contradicted_claims") or [],
            "diagnosis": rec.get("diagnosis")})
    cases = _cases_of(cases_file, {d["case_id"] for d in drafts})
    convs = _conversations_of(cases_file, {str((c.get("tags") or {}).get("conversation"))
                                           for c in cases.values()})
    out: list[dict[str, Any]] = []
    whole: dict[str, dict[str, Any]] = {}
    for draft in drafts:
        cid = draft["case_id"]
        tags = (cases.get(cid) or {}).get("tags") or {}
        line = convs.get(str(tags.get("conversation")))
        if line is not None and str(tags.get("turn")).isdigit() \
                and cid == turn_id(line["id"], int(tags["turn"])):
            # a turn: its conversation up to it (a follow-up alone asks about nothing); a
            # single-turn case whose own tags name a conversation and a turn stays itself
            _into_conversation(whole, out, line, int(tags["turn"]), draft)
            continue
        case = dict(cases.get(cid) or {"id": cid, "question": "", "needs_labels": True})
        out.append({**case, "draft": draft})
    return out, n


def _into_conversation(whole: dict[str, dict[str, Any]], out: list[dict[str, Any]],
                       line: dict[str, Any], k: int, draft: dict[str, Any]) -> None:
    """A failing turn ``k`` into its conversation's draft: the conversation as written, up
    to its last failing turn; the note is that turn's, with every failing turn (in order)
    in ``failing_turns``, their notes in ``turns`` and all their reasons in ``reasons``."""
    prior = whole.get(line["id"])
    turns = {**(prior["draft"]["turns"] if prior else {}),
             draft["case_id"]: {key: v for key, v in draft.items()
                                if key not in ("from", "run_dir", "cases_file")}}
    note = {**draft, "reasons": [r for t in turns.values() for r in t["reasons"]],
            "failing_turns": list(turns), "turns": turns}
    entry = {**line, "turns": line["turns"][:k], "draft": note}
    if prior is None:
        out.append(entry)
    else:
        out[out.index(prior)] = entry
    whole[line["id"]] = entry


def _conversations_of(cases_file: Path | None, wanted: set[str]) -> dict[str, dict[str, Any]]:
    """The conversation lines of ``wanted`` ids in the run's cases file ({} when none)."""
    if cases_file is None or not wanted:
        return {}
    from raglab.data.conversation import conversation_lines

    try:
        return conversation_lines(cases_file, wanted)
    except (OSError, TypeError, UserError):
        return {}


def _cases_of(cases_file: Path | None, wanted: set[str]) -> dict[str, dict[str, Any]]:
    """The cases of ``wanted`` ids in the run's cases file ({} when it cannot be read)."""
    if cases_file is None or not wanted:
        return {}
    from raglab.data.conversation import case_objects

    try:
        return case_objects(cases_file, wanted)
    except (OSError, TypeError, UserError):
        return {}


def run_inputs(run_dir: Path) -> list[Path]:
    """The files a run was made from and of (records, config, its dataset files, a replay
    file): what ``cases from-run --out`` must never overwrite."""
    out = [run_dir / "records.jsonl", run_dir / "config.yaml", run_dir / "metrics.json"]
    try:
        from raglab.data.dataset import resolve_path
        from raglab.data.yaml_io import load_yaml_file

        cfg = load_yaml_file(run_dir / "config.yaml") or {}
        named = [(cfg.get("dataset") or {}).get(k) for k in ("corpus", "cases", "labels")]
        named.append((cfg.get("system") or {}).get("path"))
        out += [resolve_path(p) for p in named if isinstance(p, str) and p.strip()]
    except (OSError, ValueError, TypeError, AttributeError, UserError):
        pass  # yaml.YAMLError is a ValueError
    return out


def torn_records(run_dir: Path) -> bool:
    """Whether the run's records.jsonl ends in a line cut short (a killed run, not resumed:
    that case is left out)."""
    path = run_dir / "records.jsonl"
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            if fh.tell() == 0:
                return False
            fh.seek(-1, 2)
            return fh.read(1) != b"\n"
    except OSError:
        return False


def _diagnosis_cfg(cfg: Any) -> DiagnosisCfg:
    """The run's diagnosis thresholds (config.yaml's ``diagnosis``; the defaults when it has
    none or they do not parse): for records written before diagnoses existed."""
    from pydantic import ValidationError

    try:
        return DiagnosisCfg.model_validate(cfg.get("diagnosis") or {})
    except ValidationError:
        return DiagnosisCfg()


def question_key(question: str, filters: dict[str, Any] | None) -> str:
    """Two cases are duplicates when their normalised question and filters agree."""
    return normalize(question) + "\x00" + json.dumps(filters or {}, sort_keys=True)


def read_alerts(path: Path) -> list[dict[str, Any]]:
    """The entries of ``raglab monitor``'s alerts.json (a list of objects with ISO 8601
    ``window_start`` and ``window_end``); UserError naming the file and the entry."""
    from raglab.data.finite import loads as finite_loads

    what = "not an alerts.json of raglab monitor"
    try:
        data = finite_loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        reason = getattr(e, "strerror", None) or type(e).__name__
        raise UserError(f"{what} ({reason})", file=str(path)) from None
    if not isinstance(data, list):
        raise UserError(f"{what} (expected a JSON list, got {type(data).__name__})",
                        file=str(path))
    for i, a in enumerate(data):
        if not isinstance(a, dict):
            raise UserError(f"{what}: entry {i} is a {type(a).__name__}, not an object",
                            file=str(path))
        for key in ("window_start", "window_end"):
            try:
                datetime.fromisoformat(a[key])
            except (KeyError, TypeError, ValueError):
                raise UserError(f"{what}: entry {i} has no ISO 8601 {key}",
                                file=str(path)) from None
    return data


def drafts_from_traffic(traffic: Any, feedback: str | None = None,
                        alerts: list[dict[str, Any]] | None = None
                        ) -> tuple[list[dict[str, Any]], int]:
    """``(drafts, lines picked)`` of traffic lines with ``feedback`` (case-insensitive) and/or
    in an alerted window; one draft per distinct question and filters; ``needs_labels``."""
    spans = [(datetime.fromisoformat(a["window_start"]), datetime.fromisoformat(a["window_end"]))
             for a in (alerts or []) if a.get("status", "alert") != "untested"]
    out: dict[str, dict[str, Any]] = {}
    picked = 0
    for lineno, line in traffic.lines:
        if feedback is not None and (line.feedback or "").strip().lower() != feedback.lower():
            continue
        if alerts is not None and not any(s <= line.timestamp < e for s, e in spans):
            continue
        picked += 1
        key = question_key(line.question, line.filters)
        if key in out:
            out[key]["draft"]["seen"] += 1
            continue
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]
        case: dict[str, Any] = {"id": f"traffic-{digest}", "question": line.question,
                                "filters": dict(line.filters), "answerable": True,
                                "reference_answer": None, "evidence": [], "nuggets": [],
                                "tags": {"origin": "traffic"}}
        if line.user is not None:
            case["user"] = line.user.model_dump()
        case["needs_labels"] = True
        case["draft"] = {"from": "traffic", "file": traffic.source, "line": lineno,
                         "line_id": line.id or line.case_id,
                         "timestamp": line.timestamp.isoformat(), "feedback": line.feedback,
                         "answer": line.answer, "context": _passages(
                             [h.model_dump() for h in line.context]), "seen": 1}
        out[key] = case
    return list(out.values()), picked
