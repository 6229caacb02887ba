"""JSON Lines reading (streamed, with errors naming file, line and id) and safe writing."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

from raglab.data.finite import NotFiniteError
from raglab.data.finite import loads as finite_loads
from raglab.errors import UserError, storage_error

M = TypeVar("M", bound=BaseModel)

MAX_LINE_BYTES = 16 * 1024 * 1024
_ID_FIELDS = ("id", "case_id", "doc_id")


class Problem(NamedTuple):
    """The first problem of a pydantic ValidationError, in words."""

    loc: str    # dotted path (a discriminated union's tag left out: system.path)
    kind: str   # "unknown" (a field the schema lacks), "missing", "choice", "value"
    msg: str    # the message ("unknown choice 'x' (valid: 'a', 'b')" for a bad choice)
    valid: str  # for "unknown": the valid field names, comma-separated


def _one_line_key(key: str) -> str:
    """A key as it reads on one line (control characters escaped, as ``repr`` shows them)."""
    return "".join(repr(c)[1:-1] if not c.isprintable() else c for c in key)


def first_problem(err: ValidationError, model: type[BaseModel] | None = None,
                  data: Any = None) -> Problem:
    """The one reader of validation errors (data files and configs render it)."""
    first = err.errors()[0]
    raw = list(first["loc"])
    parts = [_one_line_key(str(p)) for p in raw]  # a key may hold a line break
    # drop the union tag pydantic inserts (system.replay.path -> system.path)
    if len(parts) >= 2 and isinstance(data, dict) and isinstance(data.get(parts[0]), dict) \
            and parts[1] == data[parts[0]].get("name"):
        del parts[1]
        del raw[1]
    kind = first["type"]
    if kind == "union_tag_invalid":
        name = first["input"].get("name") if isinstance(first["input"], dict) else None
        return Problem(".".join(parts), "choice",
                       f"unknown choice {name!r} (valid: {first['ctx']['expected_tags']})", "")
    if kind == "extra_forbidden":
        owner: Any = model
        for part in raw[:-1]:
            field = getattr(owner, "model_fields", {}).get(str(part))
            if field is None:
                break
            owner = _model_in(field.annotation) or owner
        valid = ", ".join(getattr(owner, "model_fields", {}).keys())
        return Problem(".".join(parts), "unknown", first["msg"], valid)
    if kind == "missing":
        return Problem(".".join(parts), "missing", first["msg"], "")
    if kind == "model_type":  # (pydantic names the model class: "... instance of User")
        return Problem(".".join(parts), "value", "Input should be an object (a JSON "
                       "mapping of its fields)", "")
    return Problem(".".join(parts), "value", first["msg"], "")


def describe_validation_error(err: ValidationError, model: type[BaseModel]) -> str:
    p = first_problem(err, model)
    if p.kind == "unknown":
        return f"unknown field '{p.loc}' (valid fields: {p.valid})"
    if p.kind == "missing":
        return f"missing field '{p.loc}'"
    msg = p.msg.removeprefix("Value error, ")  # (a validator's own message)
    return f"field '{p.loc}': {msg}" if p.loc else msg


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def check_readable_file(path: str | Path, what: str = "file") -> Path:
    if not str(path).strip():
        raise UserError(f"empty path given for the {what}")
    p = Path(path)
    if not p.exists():
        raise UserError(f"{what} not found", file=str(p))
    if p.is_dir():
        raise UserError(f"is a directory, expected a {what} (JSON Lines)", file=str(p))
    if not p.is_file():  # a FIFO, socket or device would block or never end
        raise UserError(f"not a regular file, expected a {what} (JSON Lines)", file=str(p))
    return p


def iter_json_lines(path: str | Path, what: str = "file",
                    max_line_bytes: int = MAX_LINE_BYTES,
                    bad_value: Any = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line; raise UserError on bad input.

    ``bad_value(line_number, object_or_None, message)``, when given, is called for a line
    holding NaN, Infinity or a lone surrogate instead of raising (the line is skipped)."""
    p = check_readable_file(path, what)
    seen_any = False
    try:
        fh = open(p, "rb")
    except OSError as e:
        raise UserError(f"cannot open {what}: {e.strerror}", file=str(p)) from None
    with fh:
        lineno = 0
        while True:
            try:
                raw = fh.readline(max_line_bytes + 1)
            except OSError as e:  # e.g. EIO from a device or a failing disk
                raise UserError(f"cannot read {what}: {e.strerror or e}", file=str(p),
                                line=lineno + 1) from None
            if not raw:
                break
            lineno += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                raise UserError(f"line longer than {max_line_bytes // (1024 * 1024)} MiB",
                                file=str(p), line=lineno)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise UserError(f"not valid UTF-8 (byte {e.start + 1} of the line)",
                                file=str(p), line=lineno) from None
            if lineno == 1 and line.startswith("\ufeff"):
                line = line[1:]
            if not line.strip():
                continue
            try:
                obj = finite_loads(line, from_utf8=True)  # decoded strictly above
            except json.JSONDecodeError as e:
                raise UserError(f"malformed JSON: {e.msg} (column {e.colno})",
                                file=str(p), line=lineno) from None
            except NotFiniteError as e:
                if bad_value is not None:
                    seen_any = True
                    bad_value(lineno, shallow_loads(line), str(e))
                    continue
                raise UserError(str(e), file=str(p), line=lineno,
                                case_id=object_id(obj) if isinstance(
                                    obj := shallow_loads(line), dict) else None) from None
            if not isinstance(obj, dict):
                raise UserError(f"expected a JSON object, got {type(obj).__name__}",
                                file=str(p), line=lineno)
            seen_any = True
            yield lineno, obj
    if not seen_any:
        raise UserError(f"empty {what}: no JSON lines", file=str(p))


def shallow_loads(line: str) -> Any:
    """The line read leniently (only to name the case of an error)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def object_id(obj: dict[str, Any]) -> str | None:
    for key in _ID_FIELDS:
        v = obj.get(key)
        if isinstance(v, str) and v:
            return v
    return None


def parse_model(model: type[M], obj: dict[str, Any], *, file: str, line: int) -> M:
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        raise UserError(describe_validation_error(e, model), file=file, line=line,
                        case_id=object_id(obj)) from None


def read_models(path: str | Path, model: type[M], what: str) -> Iterator[tuple[int, M]]:
    """Stream ``model`` instances from a JSON Lines file."""
    for lineno, obj in iter_json_lines(path, what):
        yield lineno, parse_model(model, obj, file=str(path), line=lineno)


def _umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_writable_output(path: str | Path) -> Path:
    """The path a finished output is renamed to: a symlink's target (written through the
    link), refused with one line when it exists and is not a regular file (a FIFO, a
    device such as ``/dev/null``, a socket or a directory would be replaced by a regular
    file, or the rename would fail). Every output of raglab is written through
    :func:`atomic_write_chunks`, which checks here."""
    p = Path(path)
    if p.is_symlink():  # write through the link: its target gets the new text
        p = p.resolve()
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        return p
    except OSError as e:
        raise storage_error(e, p.name, p) from None
    if not stat.S_ISREG(mode):
        what = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a special file")
        raise UserError(f"{p}: the output exists and is {what}, not a regular file; raglab "
                        "writes outputs as regular files only: name another file")
    return p


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file (through links, ``..`` or hard links)."""
    a, b = Path(a), Path(b)
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def refuse_inputs(out: str | Path, inputs: Iterable[tuple[str | Path, str]],
                  flag: str, advice: str) -> None:
    """Refuse (one line) an output that is one of a command's inputs: ``inputs`` are
    ``(path, what)``, such as ``(cases, "the dataset's cases")``; ``flag`` is how the user
    named the output (``--out FILE``)."""
    for path, what in inputs:
        if same_file(out, path):
            named = f"{what}: {path}" if what else str(path)
            raise UserError(f"{flag}: that is an input of this command ({named}); {advice}")


def atomic_write_text(path: str | Path, text: str | bytes, scrubbed: bool = False) -> None:
    """Write a finished file under a temporary name, then rename it into place, with every
    known secret value scrubbed from the text (``scrubbed``: the caller scrubbed its values
    already, as the JSON writers do, so that a digits-only secret never cuts a number).

    The file gets the permissions of any file the user creates (0666 less the umask), not
    the 0600 of a temporary file, so a team's shared artifact store can read it."""
    from raglab.secrets import SCRUBBER

    if not scrubbed:
        text = SCRUBBER.scrub_bytes(text) if isinstance(text, bytes) else SCRUBBER.scrub(text)
    atomic_write_chunks(path, [text.encode("utf-8") if isinstance(text, str) else text])


def atomic_write_chunks(path: str | Path, chunks: Iterable[bytes]) -> None:
    """:func:`atomic_write_text` of the concatenated ``chunks``, written as they come (a
    file larger than memory can be rewritten); the caller scrubs them."""
    p = check_writable_output(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as e:
        raise storage_error(e, p.name, p) from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise storage_error(e, p.name, p) from None
        raise


def remove_stale_temporaries(folder: str | Path) -> list[Path]:
    """Remove what a killed writer left in ``folder``: the temporary files of
    :func:`atomic_write_text` (``.NAME.XXXX.tmp``) and of the plots (``.NAME.tmp.png``).
    Only for a folder this process holds (a run directory under its lock)."""
    removed = []
    for pattern in (".*.tmp", ".*.tmp.png"):
        for f in Path(folder).glob(pattern):
            try:
                if f.is_file() and not f.is_symlink():
                    f.unlink()
                    removed.append(f)
            except OSError:
                pass
    return removed


def json_text(obj: Any, indent: int | None = 2, **dumps: Any) -> str:
    """The JSON text of one of raglab's own documents, its strings scrubbed of known secret
    values one by one (text-level scrubbing could cut a number apart when a secret is made of
    digits), ended by a newline; write it with ``atomic_write_text(..., scrubbed=True)``."""
    from raglab.secrets import SCRUBBER

    return json.dumps(SCRUBBER.scrub_obj(obj, numbers=False), indent=indent,
                      ensure_ascii=False, allow_nan=False, **dumps) + "\n"


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """A JSON file, scrubbed value by value (:func:`json_text`)."""
    atomic_write_text(path, json_text(obj), scrubbed=True)


def write_jsonl(path: str | Path, rows: list[dict[str, Any]]) -> None:
    """A JSON Lines file, scrubbed as :func:`atomic_write_json` scrubs (numbers that are a
    secret included: rows may hold what a system answered)."""
    from raglab.secrets import SCRUBBER

    atomic_write_text(path, "".join(json.dumps(SCRUBBER.scrub_obj(r), ensure_ascii=False,
                                               allow_nan=False) + "\n" for r in rows),
                      scrubbed=True)


def read_jsonl_tolerant(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSON Lines file this program wrote, dropping a torn last line (after a kill)."""
    p = Path(path)
    if not p.exists():
        return []
    rows: list[dict[str, Any]] = []
    data = p.read_bytes()
    lines = data.split(b"\n")
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            rows.append(json.loads(raw.decode("utf-8")))
        except (json.JSONDecodeError, UnicodeDecodeError):
            if i == len(lines) - 1 or all(not r.strip() for r in lines[i + 1:]):
                break  # torn last line
            raise UserError("corrupt line (not the last one)", file=str(p), line=i + 1) from None
    return rows


def read_run_metrics(run_dir: str | Path) -> dict[str, Any]:
    """A run directory's metrics.json; UserError when it is missing or unreadable."""
    path = Path(run_dir) / "metrics.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: missing; not a finished raglab run directory") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: unreadable metrics ({exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object")
    return data


def read_run_config(run_dir: str | Path) -> dict[str, Any]:
    """A run directory's config.yaml as a dict ({} when absent); UserError when it is not
    valid YAML."""
    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        return {}
    from raglab.data.yaml_io import load_yaml_file

    data = load_yaml_file(path)
    return data if isinstance(data, dict) else {}
