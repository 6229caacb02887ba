"""Traffic lines: reading (bad lines counted, not fatal), deterministic sampling, windows.

A line with a session id (``session``: a trace's ``session.id``, ``gen_ai.conversation.id``
or MLflow session metadata; a run directory's ``conversation`` tag) is a turn of that
conversation: its ``turn`` is the one the line gives, else its place among the session's
lines by timestamp (then as read), so the monitor's figures can be sliced by turn."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from raglab.data.io import first_problem
from raglab.data.schema import Citation, FilterValue, Hit, User, forward_spans
from raglab.errors import UserError
from raglab.secrets import clip_line

_WINDOW = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: the longest window: 520 weeks (ten years)
MAX_WINDOW_S = 520 * 7 * 86400
#: the timestamps a traffic line may carry (UTC, end excluded): a line outside them is bad
TIMESTAMP_MIN = datetime(1970, 1, 1, tzinfo=UTC)
TIMESTAMP_MAX = datetime(9000, 1, 1, tzinfo=UTC)


class MonitorCfg(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "default"
    sample_rate: float = Field(0.05, ge=0, le=1, description=(
        "share of traffic lines judged by the grader (a hash of the line's id or question and "
        "its timestamp decides, so a re-run samples the same lines)"))
    window: str = Field("1d", description=(
        "time windows: a number and a unit, s m h d w (aligned to the Unix epoch, UTC), "
        "at most 520w"))
    max_contradicted: float = Field(0.05, ge=0, le=1, description=(
        "alert: a window's rate of contradicted answers (judged lines with at least one "
        "CONTRADICTED claim) is above this with confidence alert_confidence (the exact "
        "one-sided lower bound above it); with --baseline the window is tested against the "
        "baseline's rate instead"))
    alert_confidence: float = Field(0.95, ge=0.5, lt=1, description=(
        "confidence of the contradiction alert: under a true rate at or below the threshold "
        "(or the baseline's), at most 1 - alert_confidence of windows alert"))
    min_judged: int = Field(5, ge=1, description=(
        "a window is tested for contradictions only with at least this many judged lines "
        "(and at least the fewest with which the test could alert); fewer: untested"))
    drift_p: float = Field(0.01, gt=0, lt=1, description=(
        "alert: top-1 retrieval scores of a window against the baseline's, two-sample "
        "Kolmogorov-Smirnov: a p-value below drift_p and a statistic D of at least "
        "drift_min_effect"))
    drift_min_effect: float = Field(0.2, ge=0, le=1, description=(
        "the smallest KS statistic D (the largest gap between the two empirical "
        "distributions, 0-1) that alerts, so a huge window does not alert on a trivial shift"))
    min_lines: int = Field(20, ge=1, description=(
        "the drift test runs only with at least this many scored lines in the window and in "
        "the baseline; fewer: untested"))
    experiment: str = Field("raglab-monitor", description=(
        "MLflow experiment of monitor runs (tracking=none: no MLflow)"))

    @field_validator("window")
    @classmethod
    def _window(cls, v: str) -> str:
        window_seconds(v)
        return v


def window_seconds(spec: str) -> int:
    m = _WINDOW.match(str(spec))
    if not m or int(m.group(1)) == 0:
        raise ValueError(f"window {spec!r}: expected a number and a unit (s, m, h, d, w), "
                         "e.g. 1h or 1d")
    if len(m.group(1)) > 12 or int(m.group(1)) * _UNIT_S[m.group(2)] > MAX_WINDOW_S:
        raise ValueError(f"window {spec!r}: longer than the longest window, 520w (ten years)")
    return int(m.group(1)) * _UNIT_S[m.group(2)]


class TrafficLine(BaseModel):
    """One production request: the system's output plus what the user asked, and when.
    Fields other than these are ignored (production logs carry more)."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    case_id: str | None = None
    question: str = Field(min_length=1)
    timestamp: datetime
    answer: str
    candidates: list[Hit] = Field(default_factory=list)
    context: list[Hit] = Field(default_factory=list)
    citations: list[Citation] = Field(default_factory=list)
    latency_ms: dict[str, float] = Field(default_factory=dict)
    usage: dict[str, float] = Field(default_factory=dict)
    user: User | None = None
    filters: dict[str, FilterValue] = Field(default_factory=dict)
    feedback: str | None = None
    # a conversation: the session id, and the turn (1-based; numbered when read if absent)
    session: str | None = None
    turn: int | None = Field(None, ge=1)

    _forward_spans = field_validator("candidates", "context")(staticmethod(forward_spans))

    @field_validator("session", mode="before")
    @classmethod
    def _session(cls, v: Any) -> Any:
        """A number is an id too; an empty one is none."""
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        return v if v != "" else None

    @field_validator("timestamp")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        try:
            utc = v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
        except OverflowError:  # e.g. 9999-12-31T23:59:59-12:00 is in year 10000
            utc = None
        if utc is None or not TIMESTAMP_MIN <= utc < TIMESTAMP_MAX:
            raise ValueError(f"{v.isoformat()} is out of range (from {TIMESTAMP_MIN.date()} "
                             f"to before {TIMESTAMP_MAX.date()}, UTC)")
        return utc

    @property
    def key(self) -> str:
        """What identifies the line: its id (or case id) or question, and its timestamp."""
        return f"{self.id or self.case_id or self.question}\x00{self.timestamp.isoformat()}"

    def top1_score(self) -> float | None:
        """The score of the first retrieved hit (candidates, else context), if scored."""
        for hits in (self.candidates, self.context):
            if hits:
                return hits[0].score
        return None


@dataclass
class Traffic:
    source: str
    kind: Literal["file", "run", "traces"]
    lines: list[tuple[int, TrafficLine]] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)  # traces: the first bad one of each kind
    bad_by_kind: dict[str, int] = field(default_factory=dict)  # traces only
    read_as: str = ""  # what the source was read as, with its counts (one line)
    sessions: int = 0  # distinct session ids among the lines

    def number_turns(self) -> None:
        """Give each line with a session and no turn its place among the session's lines
        (by timestamp, then as read), count the sessions and say so in ``read_as``."""
        by: dict[str, list[TrafficLine]] = {}
        for _, line in self.lines:
            if line.session is not None:
                by.setdefault(line.session, []).append(line)
        for lines in by.values():
            if any(line.turn is None for line in lines):
                for k, line in enumerate(sorted(lines, key=lambda ln: ln.timestamp), 1):
                    line.turn = k if line.turn is None else line.turn
        self.sessions = len(by)
        if by and self.read_as:
            self.read_as += f"; {len(by)} session{'' if len(by) == 1 else 's'} (by turn)"

    @property
    def n_bad(self) -> int:
        """Bad lines (traces: bad traces; a trace without content is not bad)."""
        if self.kind == "traces":
            return sum(n for k, n in self.bad_by_kind.items() if k != "no content")
        return len(self.bad)


#: fewer judged lines than this in a monitor run (or fewer than all, when there are fewer
#: lines) and the run says so, with a rate that samples this many
ENOUGH_JUDGED = 20


def _draw(line: TrafficLine) -> float:
    """The line's place in [0, 1): a hash of its key, so a re-run samples the same lines."""
    h = int.from_bytes(hashlib.sha256(line.key.encode("utf-8")).digest()[:8], "big")
    return h / 2 ** 64


def sampled(line: TrafficLine, rate: float) -> bool:
    """Deterministic: the same line is always in (or out of) the sample at a given rate."""
    if rate >= 1:
        return True
    return _draw(line) < rate


def rate_for(lines: list[TrafficLine], n: int) -> float:
    """The smallest rate with two significant figures at which at least ``n`` of ``lines``
    are sampled (1 when that takes every line)."""
    if n >= len(lines):
        return 1.0
    need = max(sorted(_draw(line) for line in lines)[n - 1], 1e-12)  # a rate above it
    step = 10.0 ** (math.floor(math.log10(need)) - 1)
    rate = float(f"{math.ceil(need / step) * step:.2g}")
    while rate <= need:
        rate = float(f"{rate + step:.2g}")
    return min(rate, 1.0)


def sample_note(lines: list[TrafficLine], rate: float, noun: str = "lines") -> str | None:
    """One line when the sample is too small to judge much (under :data:`ENOUGH_JUDGED`
    lines, or under all of them when there are fewer): how many ``noun`` were read, how many
    were sampled at ``rate``, and the rate that samples enough; None otherwise."""
    n, k = len(lines), sum(sampled(line, rate) for line in lines)
    want = min(ENOUGH_JUDGED, n)
    if k >= want:
        return None
    better = rate_for(lines, want)
    got = sum(sampled(line, better) for line in lines)
    what = ("nothing is judged and no window is tested for contradictions" if k == 0
            else f"fewer than {ENOUGH_JUDGED} judged {noun} say little")
    return (f"sample: {k} of {n} {noun} sampled at monitor.sample_rate={rate:g}: {what}; "
            f"monitor.sample_rate={better:g} samples "
            + (f"all {n}" if got == n else f"{got} of them"))


def window_start(ts: datetime, seconds: int) -> datetime:
    epoch = int(ts.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, tz=UTC)


def _problem(e: ValidationError, obj: dict) -> str:
    p = first_problem(e, TrafficLine, obj)
    if p.kind == "missing":
        return f"missing field '{p.loc}'"
    msg = p.msg.removeprefix("Value error, ")
    return f"field '{p.loc}': {msg}" if p.loc else msg


def read_traffic(path: str | Path, fmt: str = "auto",
                 tracking_uri: str | None = None) -> Traffic:
    """A traffic JSON Lines file, a run directory (its records, timestamped with the
    records file's modification time; questions from the cases file its config names), or
    traces (OTLP JSON, ``mlflow://EXPERIMENT``: :mod:`raglab.traces`; ``fmt`` ``auto``
    tells them from the content)."""
    from raglab.traces.source import detect

    if fmt == "mlflow" or str(path).startswith("mlflow://") or (
            fmt != "jsonl" and Path(path).is_file() and detect(path, fmt) == "otlp"):
        return _read_traces(str(path), fmt, tracking_uri)
    p = Path(path)
    if p.is_dir():
        return _read_run_dir(p)
    if not p.is_file():
        raise UserError("traffic file not found", file=str(p))
    t = Traffic(str(p), "file")
    with open(p, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
            except (ValueError, UnicodeDecodeError) as e:
                t.bad.append(f"{p}:{lineno}: malformed JSON ({clip_line(e, 80)})")
                continue
            except RecursionError:
                t.bad.append(f"{p}:{lineno}: JSON nested too deep")
                continue
            try:
                t.lines.append((lineno, TrafficLine.model_validate(obj)))
            except ValidationError as e:
                who = obj.get("id") or obj.get("case_id")
                where = f"{p}:{lineno}" + (f" line {who}" if who else "")
                t.bad.append(f"{where}: {_problem(e, obj)}")
    t.read_as = f"read as raglab traffic JSON lines: {len(t.lines)} line(s)" + (
        f", {len(t.bad)} bad" if t.bad else "")
    t.number_turns()
    return t


def _read_traces(source: str, fmt: str, tracking_uri: str | None) -> Traffic:
    from raglab.traces.problems import MALFORMED, Problems
    from raglab.traces.source import records

    if not source.startswith("mlflow://") and not Path(source).is_file():
        raise UserError("traffic file not found", file=source)
    problems = Problems()
    t = Traffic(source, "traces")
    for line, rec in records(source, problems, fmt, tracking_uri=tracking_uri):
        obj = {**rec, "id": rec["trace_id"]}
        try:
            t.lines.append((line or len(t.lines) + 1, TrafficLine.model_validate(obj)))
        except ValidationError as e:
            problems.add(MALFORMED, source, line, rec["trace_id"], _problem(e, obj))
    t.bad_by_kind = {k: n for k, n, _ in problems.ordered()}
    t.bad = [first for _, _, first in problems.ordered()]
    t.read_as = problems.account(len(t.lines))
    t.number_turns()
    return t


def _read_run_dir(d: Path) -> Traffic:
    records = d / "records.jsonl"
    if not records.is_file():
        raise UserError(f"{d}: not a run directory (records.jsonl is missing)")
    from raglab.data.dataset import load_cases, resolve_path
    from raglab.data.io import read_jsonl_tolerant

    questions: dict[str, str] = {}
    try:
        from raglab.data.yaml_io import load_yaml_file

        cfg = load_yaml_file(d / "config.yaml") or {}
        cases, _ = load_cases(resolve_path(cfg["dataset"]["cases"]))
        questions = {c.id: c.question for c in cases}
    except (OSError, KeyError, TypeError, UserError):
        pass  # lines without a question are counted as bad below
    ts = datetime.fromtimestamp(records.stat().st_mtime, tz=UTC).isoformat()
    t = Traffic(str(d), "run")
    for i, rec in enumerate(read_jsonl_tolerant(records), 1):
        out: dict[str, Any] = dict(rec.get("output") or {})
        cid = rec.get("case_id")
        if not out or out.get("answer") is None:
            t.bad.append(f"{records}:{i} case {cid}: no answer (the system produced nothing)")
            continue
        obj = {**out, "id": cid, "question": questions.get(cid, "") if isinstance(cid, str) else "",
               "timestamp": ts}
        tags = rec.get("tags")
        if isinstance(tags, dict) and tags.get("conversation") \
                and str(tags.get("turn", "")).isdigit():
            obj.update(session=tags["conversation"], turn=int(tags["turn"]))
        try:
            t.lines.append((i, TrafficLine.model_validate(obj)))
        except ValidationError as e:
            t.bad.append(f"{records}:{i} case {cid}: {_problem(e, obj)}")
    t.number_turns()
    return t

