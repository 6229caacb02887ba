"""Replay: score SystemOutput JSON Lines logged by any system, without calling it.

Every line is validated when the system is built (a bad line is a usage error naming the
file, line and case id, before any work). A file up to ``KEEP_PARSED_BYTES`` is kept parsed
in memory; a larger one is indexed (case id -> byte range) and each line parsed again when its
case is scored, so memory stays bounded whatever the size of the file.

A replayed line with a bad value (NaN, Infinity, a lone surrogate) fails its own case with
that error, and the run goes on; a line that is not JSON, or not a SystemOutput, is refused
with one line. Outputs for cases not in the case set are counted in a warning.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from raglab.components import NO_CONTEXT, BuildContext, System
from raglab.data.dataset import resolve_path
from raglab.data.finite import NotFiniteError, may_escape_surrogate
from raglab.data.finite import check as check_finite
from raglab.data.finite import loads as finite_loads
from raglab.data.io import (
    MAX_LINE_BYTES,
    check_readable_file,
    parse_model,
    shallow_loads,
)
from raglab.data.schema import Strict, SystemOutput
from raglab.errors import UserError
from raglab.gc_pause import gc_paused
from raglab.registry import register
from raglab.systems.base import SystemRequest, ValidatedOutput
from raglab.systems.fast_output import parse_output_line

#: replay files up to this size are kept parsed; larger ones are re-read case by case
KEEP_PARSED_BYTES = 128 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"
_READ_BUFFER = 1 << 20


class ReplaySystemCfg(Strict):
    name: Literal["replay"]
    path: str


class ReplayedValueError(ValueError):
    """A replayed output holding a value raglab refuses (this case fails)."""


@register("system", "replay", config=ReplaySystemCfg)
class ReplaySystem(System):
    inline = True  # answers from memory or a local file: no worker thread needed
    #: its file can be read in parts, each by its own process (``raglab.runner.workers``)
    in_parts = True

    @staticmethod
    def split(run_cfg: Any, n: int, first_share: float | None = None
              ) -> list[tuple[int, int]]:
        """The file's parts for ``n`` processes (see :func:`parts`)."""
        return parts(resolve_path(run_cfg.system.path), n, first_share)

    @staticmethod
    def check_split(path: str, lines: list[tuple[int, dict[str, int]]], dataset: Any,
                    warnings: list[str]) -> None:
        """The checks of the whole file read in parts (see :func:`check_parts`)."""
        check_parts(path, lines, dataset, warnings)

    @classmethod
    def preflight(cls, run_cfg: Any) -> None:
        check_readable_file(resolve_path(run_cfg.system.path), "replay file")

    def __init__(self, cfg: ReplaySystemCfg, ctx: BuildContext = NO_CONTEXT,
                 part: tuple[int, int] | None = None):
        """``part``: read only the lines that start in this byte range of the file (a part
        from :func:`parts`, for one of several processes scoring it; line numbers in errors
        stay those of the whole file). The checks across parts (a case id in two of them, an
        empty file, ids not in the case set) are then the caller's: :func:`check_parts`."""
        self.cfg, self.ctx = cfg, ctx
        dataset = ctx.dataset
        p = check_readable_file(resolve_path(cfg.path), "replay file")
        self.path = str(p)
        keep = p.stat().st_size <= KEEP_PARSED_BYTES
        self.outputs: dict[str, dict[str, Any]] = {}
        self.index: dict[str, tuple[int, int]] = {}
        self.bad: dict[str, str] = {}  # case id -> the refused value's message
        refused: dict[str, tuple[int, str]] = {}  # case id -> (line in the part, message)
        self.warnings: list[str] = []
        #: the line of each case id read (its output, or the refused value), numbered from
        #: the first line of the part
        self.lines: dict[str, int] = {}
        seen = self.lines
        first, last = part if part is not None else (0, None)
        # parsed lines hold no reference cycles: the collector would only walk them
        with open(p, "rb", buffering=_READ_BUFFER) as fh, gc_paused():
            try:
                for lineno, (start, raw) in enumerate(_raw_lines(fh, first, last), start=1):
                    if len(raw) - raw.endswith(b"\n") > MAX_LINE_BYTES:
                        raise UserError(f"line longer than {MAX_LINE_BYTES // (1024 * 1024)} "
                                        "MiB", file=self.path, line=lineno)
                    if start == 0 and raw.startswith(_BOM):
                        raw, start = raw[len(_BOM):], start + len(_BOM)
                    if not raw or raw.isspace():  # (no copy of a long line, as strip() makes)
                        continue
                    out = self._parse(raw, lineno)
                    cid = out["case_id"] if isinstance(out, dict) else out.case_id
                    if cid in seen:
                        raise UserError("duplicate case_id in replay file", file=self.path,
                                        line=lineno, case_id=cid)
                    seen[cid] = lineno
                    if isinstance(out, _Bad):
                        refused[cid] = (lineno, out.message)
                    elif keep:
                        self.outputs[cid] = out
                    else:
                        self.index[cid] = (start, len(raw))
            except UserError as e:
                if first and e.line is not None:  # numbered from the part's first line
                    raise UserError(e.message, file=e.file, line=e.line + _lines_before(
                        p, first), case_id=e.case_id) from None
                raise
        #: where the part starts: ``lines`` are numbered from its first line
        self.first = first
        base = _lines_before(p, first) if first and refused else 0  # (counted when needed)
        self.bad = {cid: f"{self.path}:{n + base}: {msg}" for cid, (n, msg) in refused.items()}
        self._fh = None if keep else open(p, "rb")
        if part is None:
            check_parts(self.path, [(0, self.lines)], dataset, self.warnings)

    def _parse(self, raw: bytes, lineno: int) -> dict[str, Any] | _Bad:
        # the fast path refuses NaN and Infinity in its float fields; pydantic's JSON reader
        # accepts lone surrogates, so a line that may hold one goes the slow way, which
        # finds them (as it finds NaN in a hit's metadata)
        if not may_escape_surrogate(raw):
            try:
                out = parse_output_line(raw)
            except Exception:  # the ordinary path names the problem (or accepts the line)
                pass
            else:
                try:  # a hit's free-form metadata is the one place nesting is unbounded
                    for stage in ("candidates", "context"):
                        for h in out[stage]:
                            if h["metadata"]:
                                check_finite(h["metadata"])
                    return out
                except NotFiniteError:
                    pass
        return _slow_parse(raw, self.path, lineno)

    def answer(self, req: SystemRequest) -> ValidatedOutput:
        if req.case_id in self.bad:
            raise ReplayedValueError(self.bad[req.case_id])
        # a run asks once per case: the output is let go with its record, not kept to the end
        out = self.outputs.pop(req.case_id, None)
        if out is None and req.case_id in self.index:
            start, size = self.index[req.case_id]
            self._fh.seek(start)
            out = parse_output_line(self._fh.read(size))
        if out is None:
            raise LookupError(f"no output for this case in {self.path}")
        return ValidatedOutput(out)


def _raw_lines(fh: Any, first: int = 0, last: int | None = None) -> Iterator[tuple[int, bytes]]:
    """``(byte offset, line)`` for each line of a binary file that starts at or after byte
    ``first`` (a line start) and before ``last`` (None: the end), never more than
    ``MAX_LINE_BYTES`` + 1 bytes of one line at a time (read through the file object's
    buffer: a third of the time of reading the file at once and cutting it into lines)."""
    fh.seek(first)
    offset = first
    while last is None or offset < last:
        raw = fh.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        yield offset, raw
        offset += len(raw)


def parts(path: str | Path, n: int, first_share: float | None = None
          ) -> list[tuple[int, int]]:
    """``n`` byte ranges that split the file at line starts (fewer when it has fewer lines),
    for :class:`ReplaySystem`'s ``part``: the first about ``first_share`` of the bytes
    (None: ``1 / n``), the others of about equal size."""
    size = Path(path).stat().st_size
    share = 1 / n if first_share is None else min(max(first_share, 0.0), 1.0)
    cuts = [0]
    with open(path, "rb") as fh:
        for i in range(1, n):
            at = max(cuts[-1], int(size * (share + (1 - share) * (i - 1) / (n - 1))))
            if at == 0:
                continue
            fh.seek(at - 1)
            if not fh.readline(MAX_LINE_BYTES + 1).endswith(b"\n"):
                continue  # the end of the file, or a line too long to be read (refused)
            at = fh.tell()  # the start of the next line
            if cuts[-1] < at < size:
                cuts.append(at)
    cuts.append(size)
    return list(zip(cuts, cuts[1:]))


def check_parts(path: str, lines: list[tuple[int, dict[str, int]]], dataset: Any,
                warnings: list[str]) -> None:
    """The checks of a whole replay file read in parts (``lines``: for each part in file
    order, its first byte and its case ids -> line numbered from the part's first line): no
    case id twice (the first repeated line is named), not empty; a warning in ``warnings``
    for outputs of cases not in the case set."""
    seen: dict[str, int] = {}
    for first, part in lines:
        if seen:
            again = [(n, cid) for cid, n in part.items() if cid in seen]
            if again:
                n, cid = min(again)
                raise UserError("duplicate case_id in replay file", file=path,
                                line=n + (_lines_before(Path(path), first) if first else 0),
                                case_id=cid)
        seen.update(part)
    if not seen:
        raise UserError("empty replay file: no JSON lines", file=path)
    if dataset is not None:
        known = {c.id for c in dataset.cases} | {q.case_id for q in dataset.quarantined}
        extra = sorted(cid for cid in seen if cid not in known)
        if extra:
            shown = ", ".join(json.dumps(c) for c in extra[:3])
            warnings.append(
                f"{path}: {len(extra)} replayed output(s) for cases not in the case "
                f"set, ignored ({shown}{', ...' if len(extra) > 3 else ''})")


def _lines_before(path: Path, offset: int) -> int:
    """How many lines end before byte ``offset`` of the file."""
    n, left = 0, offset
    with open(path, "rb") as fh:
        while left > 0:
            block = fh.read(min(left, 1 << 24))
            if not block:
                break
            n += block.count(b"\n")
            left -= len(block)
    return n


class _Bad:
    """A line whose case id is known but whose values raglab refuses (that case fails)."""

    def __init__(self, case_id: str, message: str):
        self.case_id, self.message = case_id, message


def _slow_parse(raw: bytes, path: str, lineno: int) -> dict[str, Any] | _Bad:
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
    return parse_model(SystemOutput, obj, file=path, line=lineno).model_dump()
