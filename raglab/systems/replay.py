"""Replay: score SystemOutput JSON Lines logged by any system, without calling it.

Every line is validated when the system is built (a bad line is a usage error naming the
file, line and case id, before any work). A file up to ``KEEP_PARSED_BYTES`` is kept parsed
in memory; a larger one is indexed (case id -> byte range) and each line read again when its
case is scored, so memory stays bounded whatever the size of the file. A line read again was
validated already: it is parsed as plain JSON and taken as the model's dump would give it
(:func:`as_dumped`: defaults filled, fields in order), unless the validation converted one of
its values (then, and for lines that took the slow way, it is validated again); a file that
changed after it was checked fails the cases still to score.

A replayed line with a bad value (NaN, Infinity, a lone surrogate) fails its own case with
that error, and the run goes on; a line that is not JSON, or not a SystemOutput, is refused
with one line. Outputs for cases not in the case set are counted in a warning, and so are
fields the contract does not name (kept, as the http adapter keeps them:
raglab.data.schema.accept_output). Lines without such fields take pydantic's JSON reader
directly; only the others take the slower way.
"""

from __future__ import annotations

import itertools
import json
import operator
import os
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import Field, ValidationError
from pydantic_core import from_json

from raglab.components import NO_CONTEXT, BuildContext, System
from raglab.data.dataset import resolve_path
from raglab.data.finite import NotFiniteError, may_escape_surrogate
from raglab.data.finite import check as check_finite
from raglab.data.finite import loads as finite_loads
from raglab.data.io import MAX_LINE_BYTES, check_readable_file, parse_model, shallow_loads
from raglab.data.schema import Citation, ContractError, Hit, Strict, SystemOutput, accept_output
from raglab.errors import UserError
from raglab.registry import register
from raglab.systems.base import SystemRequest, ValidatedOutput

#: replay files up to this size are kept parsed; larger ones are re-read case by case
KEEP_PARSED_BYTES = 128 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"
_READ_BUFFER = 1 << 20


class ReplaySystemCfg(Strict):
    name: Literal["replay"]
    path: str
    # traces (OTLP JSON, mlflow://EXPERIMENT: docs/traces.md); unused for JSON Lines
    case_id_attribute: str = Field("raglab.case_id", min_length=1, description=(
        "traces: the attribute naming a trace's case (else its question pairs it)"))
    doc_id_key: str = Field("doc_id", min_length=1, description=(
        "traces: the document metadata key holding the corpus id (then 'source', then the "
        "document's own id)"))


class ReplayedValueError(ValueError):
    """A replayed output holding a value raglab refuses (this case fails)."""


@register("system", "replay", config=ReplaySystemCfg)
class ReplaySystem(System):
    blocking = False  # a lookup in memory (or one read of an indexed line)

    @classmethod
    def preflight(cls, run_cfg: Any) -> None:
        if not run_cfg.system.path.startswith(_MLFLOW):
            check_readable_file(resolve_path(run_cfg.system.path), "replay file")

    @classmethod
    def identity(cls, run_cfg: Any) -> dict[str, str]:
        from raglab.data.dataset import file_sha256

        if run_cfg.system.path.startswith(_MLFLOW):
            return {"replay_source": run_cfg.system.path}
        return {"replay_sha256": file_sha256(resolve_path(run_cfg.system.path))}

    def __init__(self, cfg: ReplaySystemCfg, ctx: BuildContext = NO_CONTEXT):
        self.cfg, self.ctx = cfg, ctx
        if cfg.path.startswith(_MLFLOW) or _is_traces(resolve_path(cfg.path)):
            self._from_traces(cfg, ctx)  # raglab.traces reads and pairs them
            return
        dataset = ctx.dataset
        p = check_readable_file(resolve_path(cfg.path), "replay file")
        self.path = str(p)
        keep = p.stat().st_size <= KEEP_PARSED_BYTES
        self.outputs: dict[str, dict[str, Any]] = {}
        self.index: dict[str, tuple[int, int]] = {}
        self.slow: set[str] = set()  # indexed lines that took the slow way when checked
        self.bad: dict[str, str] = {}  # case id -> the refused value's message
        self.warnings: list[str] = []
        seen: dict[str, int] = {}  # case id -> its line
        self.added: set[str] = set()  # fields outside the contract, kept
        with open(p, "rb", buffering=_READ_BUFFER) as fh:
            for lineno, (start, raw) in enumerate(_raw_lines(fh), start=1):
                if len(raw) - raw.endswith(b"\n") > MAX_LINE_BYTES:
                    raise UserError(f"line longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB",
                                    file=self.path, line=lineno)
                if start == 0 and raw.startswith(_BOM):
                    raw, start = raw[len(_BOM):], start + len(_BOM)
                if not raw or raw.isspace():  # (no copy of a long line, as strip() makes)
                    continue
                out, fast = self._parse(raw, lineno)
                cid = out.case_id
                if cid in seen:
                    raise UserError("duplicate case_id in replay file", file=self.path,
                                    line=lineno, case_id=cid)
                seen[cid] = lineno
                if isinstance(out, _Bad):
                    self.bad[cid] = f"{self.path}:{lineno}: {out.message}"
                elif keep:
                    self.outputs[cid] = out.model_dump()
                else:  # checked; read again when its case is scored
                    self.index[cid] = (start, len(raw))
                    if not fast:
                        self.slow.add(cid)
        self._fh = None if keep else open(p, "rb", buffering=0)  # read with pread
        # the file as checked: an indexed line is read again only while it is unchanged
        self._stat = None if keep else _file_state(self._fh)
        if not seen:
            raise UserError("empty replay file: no JSON lines", file=self.path)
        if dataset is not None:
            known = {c.id for c in dataset.cases} | {q.case_id for q in dataset.quarantined}
            extra = sorted(cid for cid in seen if cid not in known)
            if extra:
                shown = ", ".join(json.dumps(c) for c in extra[:3])
                self.warnings.append(
                    f"{self.path}: {len(extra)} replayed output(s) for cases not in the case "
                    f"set, ignored ({shown}{', ...' if len(extra) > 3 else ''})")
        if self.added:
            self.warnings.append(
                f"{self.path}: the outputs carry fields the output contract does not name, "
                "kept in the record (on hits: in 'metadata'; on the output: in 'extra'): "
                + ", ".join(sorted(self.added)))

    def _from_traces(self, cfg: ReplaySystemCfg, ctx: BuildContext) -> None:
        from raglab.traces.match import pair
        from raglab.traces.problems import Problems
        from raglab.traces.source import records

        src = cfg.path if cfg.path.startswith(_MLFLOW) else str(resolve_path(cfg.path))
        self.path, self.index, self.slow, self.bad, self.added = src, {}, set(), {}, set()
        self._fh = self._stat = None
        problems = Problems()
        run = getattr(ctx, "run", None)
        uri = getattr(getattr(run, "tracking", None), "uri", None)
        dataset = ctx.dataset
        cases = None if dataset is None else dataset.cases
        got = pair(records(src, problems, doc_id_key=cfg.doc_id_key,
                           case_id_attribute=cfg.case_id_attribute, tracking_uri=uri),
                   cases, problems, src)
        self.outputs = got.outputs
        self.warnings = got.warnings(src, problems)
        if not self.outputs:
            raise UserError("no trace paired with a case (" + (
                "; ".join(self.warnings) or "no trace") + ")", file=src)

    def _parse(self, raw: bytes, lineno: int) -> tuple[SystemOutput | _Bad, bool]:
        """The line's output, or _Bad (a value that fails its case), and whether the line
        took the fast way (pydantic's JSON reader, no field of its own)."""
        # pydantic's JSON reader accepts lone surrogates (and NaN in a hit's free-form
        # metadata), so a line that may hold one goes the slow way, which finds them
        if not may_escape_surrogate(raw):
            try:
                # (the schema's own JSON validator: model_validate_json without its wrapper)
                out = SystemOutput.__pydantic_validator__.validate_json(raw)
            except Exception:  # the slow path names the problem (or accepts the line)
                pass
            else:
                # a hit's free-form metadata is the one place nesting is unbounded (looked
                # at hit by hit only when a hit has some)
                if not (any(map(_metadata, out.candidates))
                        or any(map(_metadata, out.context))):
                    return out, True
                try:
                    for h in (*out.candidates, *out.context):
                        if h.metadata:
                            check_finite(h.metadata)
                    return out, True
                except NotFiniteError:
                    pass
        return _slow_parse(raw, self.path, lineno, self.added), False

    def answer(self, req: SystemRequest) -> ValidatedOutput:
        if req.case_id in self.bad:
            raise ReplayedValueError(self.bad[req.case_id])
        # a run asks once per case: the output is let go with its record, not kept to the end
        out = self.outputs.pop(req.case_id, None)
        if out is None and req.case_id in self.index:
            start, size = self.index[req.case_id]
            assert self._fh is not None  # an indexed file is kept open
            if _file_state(self._fh) != self._stat:
                raise ReplayedValueError(f"{self.path} changed after it was checked; run "
                                         "again")
            line = os.pread(self._fh.fileno(), size, start)  # (one call: no seek)
            # validated by the one output schema when the system was built: its JSON is
            # what the model's dump gives once defaults are filled, unless a value was
            # coerced (then it is validated again, as are lines that took the slow way)
            out = None if req.case_id in self.slow else as_dumped(from_json(line))
            if out is None:
                try:
                    out = SystemOutput.model_validate_json(line).model_dump()
                except ValidationError:  # checked when built: a line with fields of its own
                    out = accept_output(finite_loads(line.decode("utf-8"),
                                                     from_utf8=True))[0].model_dump()
        if out is None:
            raise LookupError(f"no output for this case in {self.path}")
        return ValidatedOutput(out)


_MLFLOW = "mlflow://"
_metadata = operator.attrgetter("metadata")


def _is_traces(path: Any) -> bool:
    """A trace file (OTLP JSON: raglab.traces), told from its content."""
    from raglab.traces.source import is_trace_source

    return is_trace_source(path)


def _file_state(fh: Any) -> tuple[int, int]:
    """The size and modification time of an open file (what a change to it moves)."""
    st = os.fstat(fh.fileno())
    return st.st_size, st.st_mtime_ns


#: each model's fields in order, with their defaults (as ``model_dump`` gives them)
_OUT_FIELDS = ("case_id", "candidates", "context", "answer", "citations", "latency_ms",
               "usage")
_OUT_DEFAULTS: dict[str, Any] = {"candidates": list, "context": list, "answer": lambda: None,
                                 "citations": list, "latency_ms": dict, "usage": dict}
_HIT_FIELDS = tuple(Hit.model_fields)
_HIT_DEFAULTS = tuple(f.default for f in Hit.model_fields.values())
_CITATION_FIELDS = tuple(Citation.model_fields)
_NONE_EXCLUDED = ("model", "extra")  # left out of the dump when None
assert _OUT_FIELDS + _NONE_EXCLUDED == tuple(SystemOutput.model_fields)
assert _HIT_FIELDS == ("doc_id", "text", "score", "start", "end", "metadata")
assert _CITATION_FIELDS == ("sentence", "context")
_MISSING = object()
_chain = itertools.chain.from_iterable
_score = operator.itemgetter("score")
_SCORE_TYPES = frozenset({float, type(None)})


def as_dumped(obj: Any) -> dict[str, Any] | None:
    """The JSON of a line that :class:`SystemOutput` validated (extra fields forbidden) as
    ``model_dump`` of that model gives it: the same keys in the same order, defaults
    filled, or None when the validation changed a value (a whole number or a string given
    for a float, a ``model`` or ``extra`` given as null): the line is then validated again.
    """
    if type(obj) is not dict or "case_id" not in obj:
        return None
    out: dict[str, Any] = {}
    for k in _OUT_FIELDS:
        v = obj.get(k, _MISSING)
        out[k] = _OUT_DEFAULTS[k]() if v is _MISSING else v
    for k in _NONE_EXCLUDED:
        if k in obj:
            if obj[k] is None:
                return None
            out[k] = obj[k]
    for k in ("latency_ms", "usage"):
        for v in out[k].values():
            if type(v) is not float:
                return None
    full, head = _HIT_FIELDS, _HIT_FIELDS[:-1]
    for stage in ("candidates", "context"):
        hits = out[stage]
        if not hits:
            continue
        # every hit's keys in one tuple, against the first hit's repeated (the same key
        # objects, so mostly an identity test): one C pass, no tuple or set per hit. A
        # hit's keys are unique, so the two match only if each hit has the first's keys
        first = tuple(hits[0])
        same = (first == full or first == head) and \
            tuple(_chain(hits)) == first * len(hits)
        if not same or first != full:
            if same:  # (the usual case: no metadata, the last field)
                for h in hits:
                    h["metadata"] = None
            else:
                out[stage] = hits = [h if tuple(h) == full else
                                     {k: h.get(k, d) for k, d in zip(full, _HIT_DEFAULTS)}
                                     for h in hits]
        if not set(map(type, map(_score, hits))) <= _SCORE_TYPES:  # a coerced score
            return None
    cites = out["citations"]
    for i, c in enumerate(cites):
        if tuple(c) != _CITATION_FIELDS:
            cites[i] = {"sentence": c["sentence"], "context": c.get("context", [])}
    return out


def _raw_lines(fh: Any) -> Iterator[tuple[int, bytes]]:
    """``(byte offset, line)`` for each line of a binary file, never more than
    ``MAX_LINE_BYTES`` + 1 bytes of one line at a time."""
    offset = 0
    while True:
        raw = fh.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        yield offset, raw
        offset += len(raw)


class _Bad:
    """A line whose case id is known but whose values raglab refuses (that case fails)."""

    def __init__(self, case_id: str, message: str):
        self.case_id, self.message = case_id, message


def _slow_parse(raw: bytes, path: str, lineno: int,
                added: set[str] | None = None) -> SystemOutput | _Bad:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"not valid UTF-8 (byte {e.start + 1} of the line)", file=path,
                        line=lineno) from None
    try:
        obj = finite_loads(line, from_utf8=True)  # decoded strictly above
    except json.JSONDecodeError as e:
        raise UserError(f"malformed JSON: {e.msg} (column {e.colno})", file=path,
                        line=lineno) from None
    except NotFiniteError as e:
        lenient = shallow_loads(line)
        cid = lenient.get("case_id") if isinstance(lenient, dict) else None
        if not isinstance(cid, str) or not cid:
            raise UserError(str(e), file=path, line=lineno) from None
        return _Bad(cid, str(e))
    if not isinstance(obj, dict):
        raise UserError(f"expected a JSON object, got {type(obj).__name__}", file=path,
                        line=lineno)
    try:
        out, names = accept_output(obj)
    except ContractError as e:
        raise UserError(str(e), file=path, line=lineno,
                        case_id=obj.get("case_id") if isinstance(obj.get("case_id"), str)
                        else None) from None
    except ValidationError as e:
        reversed_span = _reversed_span(obj, e)
        if reversed_span is not None:  # a value that fails its case, as a system's would
            return _Bad(obj["case_id"], reversed_span)
    else:
        if added is not None:
            added.update(names)
        return out
    return parse_model(SystemOutput, obj, file=path, line=lineno)  # the one line


def _reversed_span(obj: dict[str, Any], e: ValidationError) -> str | None:
    """The message for a line whose only problems are reversed hit spans (the output
    schema's span check, raglab.data.schema.forward_spans), else None."""
    errors = e.errors()
    if not all(err["type"] == "reversed_span" and len(err["loc"]) == 1
               and err["loc"][0] in ("candidates", "context") for err in errors):
        return None
    cid = obj.get("case_id")
    if not isinstance(cid, str) or not cid:
        return None
    stage, rank = str(errors[0]["loc"][0]), int(errors[0]["ctx"]["hit"])
    hit = obj[stage][rank - 1]
    return (f"{stage} hit {rank} ({hit['doc_id']}): span {hit['start']}-{hit['end']} is "
            "not a forward range")
