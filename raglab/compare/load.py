"""Loading a run for a comparison: a run directory or an MLflow run id (downloaded).

Everything a comparison reads comes from the run's own files (``records.jsonl``,
``metrics.json``, ``config.yaml``); nothing is recomputed.
"""

from __future__ import annotations

import atexit
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raglab.errors import UserError

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
MLFLOW_ID = re.compile(r"^[0-9a-f]{32}$")
UNFINISHED_STATUSES = ("KILLED", "FAILED", "RUNNING", "SCHEDULED")


@dataclass
class RunSource:
    ref: str                 # what the user passed
    run_dir: Path            # local directory (an MLflow run is downloaded to a temp dir)
    label: str               # short name (run_name, sweep overrides, or dir name)
    config: dict             # config.yaml
    metrics: dict            # metrics.json ({} when missing: the run is incomplete)
    records: list[dict]      # what a comparison reads of each records.jsonl line, in file
    #                          order (read_rows: case_id, tags, gold.answerable, metrics...)
    mlflow_run_id: str | None = None
    tracking_uri: str | None = None
    status: str | None = None          # MLflow status (None for a run directory)
    origin_dir: Path | None = None     # where an MLflow run was written (its raglab.run_dir)
    _by_id: dict[str, dict] | None = field(default=None, repr=False, compare=False)

    def by_id(self) -> dict[str, dict]:
        """Records (their rows, :func:`read_rows`) by case id."""
        if self._by_id is None:
            self._by_id = {r["case_id"]: r for r in self.records}
        return self._by_id

    def answers(self, case_ids: set[str]) -> dict[str, str | None]:
        """The answer of each of ``case_ids`` (None: the system gave none), read again from
        ``records.jsonl`` (rows do not keep outputs), or from the rows when they hold them."""
        out: dict[str, str | None] = {}
        if not case_ids:
            return out
        held = [r for r in self.records if "output" in r]
        if held or not (self.run_dir / "records.jsonl").is_file():
            for r in held:
                if r["case_id"] in case_ids:
                    out[r["case_id"]] = _answer_of(r)
            return out
        import json

        # the first pass (read_rows) checked every line: this one parses only the lines of
        # the cases asked for, told by the case id raglab writes first in each record
        with open(self.run_dir / "records.jsonl", "rb") as fh:
            for raw in fh:
                m = _LEADING_ID.match(raw)
                if m is not None and json.loads(b'"' + m.group(1) + b'"') not in case_ids:
                    continue
                try:
                    obj = json.loads(raw)
                except ValueError:      # a torn last line, dropped by the first pass too
                    continue
                if isinstance(obj, dict) and obj.get("case_id") in case_ids:
                    out[obj["case_id"]] = _answer_of(obj)
        return out

    def incomplete(self) -> str | None:
        """Why this run did not finish, or None."""
        if self.status in UNFINISHED_STATUSES:
            return f"its MLflow status is {self.status}"
        if not self.metrics:
            return "metrics.json is missing"
        n = self.metrics.get("n_cases")
        if isinstance(n, int) and len(self.by_id()) < n:
            return f"records.jsonl holds {len(self.by_id())} of its {n} cases"
        return None

    def dataset_cases(self) -> Path | None:
        ds = self.config["dataset"] if isinstance(self.config.get("dataset"), dict) else {}
        cases = ds.get("cases")
        if not cases:
            return None
        from raglab.data.dataset import resolve_path

        path = resolve_path(str(cases))
        if path.is_absolute():
            return path
        # relative to where the run was started: the cwd, or a directory above the run's
        bases = [Path.cwd()]
        for d in (self.origin_dir, self.run_dir if self.mlflow_run_id is None else None):
            if d is not None:
                bases += list(d.parents)[:4]
        return next((b / path for b in bases if (b / path).is_file()), Path.cwd() / path)


def _read_yaml(path: Path) -> dict:
    if not path.is_file():
        return {}
    from raglab.data.yaml_io import load_yaml_file

    data = load_yaml_file(path)   # plain data only, aliases bounded; one line on errors
    return data if isinstance(data, dict) else {}


#: the case id at the start of a record line as raglab writes it (``{"case_id": "..."``)
_LEADING_ID = re.compile(rb'\{\s*"case_id"\s*:\s*"((?:[^"\\]|\\.)*)"')

#: what a comparison keeps of a record, beside case_id, tags, gold.answerable and metrics
#: (each when the record has it: a record without ``diagnosis`` is from an older raglab)
ROW_FIELDS = ("diagnosis", "repeats", "repeat_variance", "weight")


def _answer_of(rec: dict) -> str | None:
    out = rec.get("output")
    answer = out.get("answer") if isinstance(out, dict) else None
    return answer if isinstance(answer, str) else None


class MetricRow(Mapping):
    """One record's metrics, read-only and compact: the metric names are one tuple shared
    by every record that has the same ones (in the same order), and repeated values (0.0,
    1.0, None) are one object each for the whole run. A dict of 150 metrics per record
    doubled a comparison's memory."""

    __slots__ = ("_names", "_index", "_values")

    def __init__(self, names: tuple[str, ...], index: dict[str, int], values: tuple):
        self._names, self._index, self._values = names, index, values

    def __getitem__(self, key: str) -> Any:
        return self._values[self._index[key]]

    def get(self, key: str, default: Any = None) -> Any:
        i = self._index.get(key)
        return default if i is None else self._values[i]

    def layout(self) -> tuple[tuple[str, ...], tuple]:
        """``(names, values)``: the shared names tuple (one object for every row with the
        same metrics) and this row's values in its order."""
        return self._names, self._values

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return repr(dict(self))


class _Compactor:
    """Shares what the rows of one run have in common (names, values, tags)."""

    def __init__(self) -> None:
        self.schemas: dict[tuple[str, ...], tuple[tuple[str, ...], dict[str, int]]] = {}
        self.values: dict[tuple[type, Any], Any] = {}
        self.golds = {True: {"answerable": True}, False: {"answerable": False}}

    def metrics(self, metrics: dict[str, Any]) -> MetricRow:
        names = tuple(metrics)
        schema = self.schemas.get(names)
        if schema is None:
            names = tuple(sys.intern(n) for n in names)
            schema = self.schemas[names] = (names, {n: i for i, n in enumerate(names)})
        values = self.values
        return MetricRow(schema[0], schema[1], tuple(
            v if v == 0 and isinstance(v, float) and str(v) == "-0.0"  # (-0.0 == 0.0)
            else values.setdefault((type(v), v), v) for v in metrics.values()))

    def tags(self, tags: dict[str, Any]) -> dict[str, Any]:
        return {sys.intern(k) if isinstance(k, str) else k:
                sys.intern(v) if isinstance(v, str) else v for k, v in tags.items()}


def _is_weight(value: Any) -> bool:
    """A case's weight as raglab writes it: a finite number >= 0 (not a bool, not null)."""
    import math

    return isinstance(value, int | float) and not isinstance(value, bool) and \
        math.isfinite(value) and value >= 0


def read_rows(path: Path) -> list[dict]:
    """What a comparison reads of each record of ``records.jsonl``, streamed (one whole
    record in memory at a time): ``case_id``, ``tags``, ``gold: {answerable}``, ``metrics``
    (a read-only :class:`MetricRow`) and :data:`ROW_FIELDS`. UserError, naming file, line
    and case id, on a line that is not a record, a metric value that is not a number or
    null, a weight that is not a finite number >= 0, or a case recorded twice."""
    if not path.is_file():
        hint = (f" (a sweep directory: give one of its jobs, such as {path.parent / '0'}, or "
                "compare the sweep with raglab compare SWEEP --baseline JOB)"
                if (path.parent / "multirun.yaml").is_file() else "")
        raise UserError(f"not a raglab run directory: {path.name} is missing{hint}",
                        file=str(path.parent))
    from raglab.data.record import CaseRecord, RecordLines

    file = str(path)
    rows: list[dict] = []
    seen: dict[str, int] = {}
    shared = _Compactor()
    for i, _, r in RecordLines(path):
        if not isinstance(r.get("case_id"), str):
            raise UserError("a record without a case_id", file=file, line=i)
        cid = r["case_id"]
        if not isinstance(r.get("metrics"), dict):
            raise UserError("a record without metrics", file=file, line=i, case_id=cid)
        rec = CaseRecord.from_json(r, file=file, line=i)  # the records.jsonl contract
        if cid in seen:
            raise UserError(f"the case is recorded twice (first on line {seen[cid]}): not "
                            "a file raglab wrote", file=file, line=i, case_id=cid)
        seen[cid] = i
        if "weight" in r and not _is_weight(r["weight"]):
            import json

            shown = json.dumps(r["weight"], default=str)[:40]
            raise UserError(f"weight {shown}: a case's weight must be a finite number >= 0",
                            file=file, line=i, case_id=cid)
        for name, value in rec.metrics.items():
            if value is not None and (not isinstance(value, int | float)
                                      or isinstance(value, bool)):
                raise UserError(f"metric '{name}' is {type(value).__name__} "
                                f"{str(value)[:40]!r}, expected a number or null",
                                file=file, line=i, case_id=cid)
        row = {"case_id": cid, "tags": shared.tags(rec.tags),
               "gold": shared.golds[bool(rec.gold.answerable)],
               "metrics": shared.metrics(rec.metrics)}
        for key in ROW_FIELDS:
            if key in r:
                row[key] = r[key]
        rows.append(row)
    if not rows:
        raise UserError("no records: the run scored no case", file=file)
    return rows


def _read_metrics(run_dir: Path) -> dict:
    if not (run_dir / "metrics.json").is_file():
        return {}
    from raglab.data.io import read_run_metrics

    metrics = read_run_metrics(run_dir)
    versions = metrics.get("metric_versions")
    if versions is not None and not isinstance(versions, dict):
        raise UserError("'metric_versions' must map each metric family to its version "
                        f"(found {type(versions).__name__})", file=str(run_dir / "metrics.json"))
    return metrics


def load_dir(ref: str, run_dir: Path, label: str | None = None) -> RunSource:
    run_dir = run_dir.resolve()
    if not run_dir.is_dir():
        raise UserError(f"no such run directory: {ref}")
    records = read_rows(run_dir / "records.jsonl")
    config = _read_yaml(run_dir / "config.yaml")
    metrics = _read_metrics(run_dir)
    if label is None:
        label = config.get("run_name") if isinstance(config.get("run_name"), str) else None
    if label is None and (run_dir.parent / "multirun.yaml").is_file():
        from raglab.compare.naming import job_label

        label = job_label(run_dir)
    return RunSource(ref, run_dir, label or run_dir.name, config, metrics, records)


def _temp_dir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="raglab-compare-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def load_mlflow(run_id: str, tracking_uri: str, label: str | None = None) -> RunSource:
    from raglab.tracking.mlflow_store import read_run

    dest = _temp_dir()
    info = read_run(run_id, tracking_uri, dest)
    if not (dest / "records.jsonl").is_file():
        raise UserError(f"MLflow run {run_id} has no records.jsonl artifact")
    src = load_dir(run_id, dest, label or info.get("run_name") or run_id[:8])
    src.mlflow_run_id = run_id
    src.tracking_uri = tracking_uri
    src.status = info.get("status")
    origin = info["tags"].get("raglab.run_dir")
    src.origin_dir = Path(origin) if origin and Path(origin).is_dir() else None
    return src


def load_run(ref: str, tracking_uri: str | None = None) -> RunSource:
    """A run directory, or an MLflow run id read back from ``tracking_uri`` (default
    ``sqlite:///mlflow.db``). UserError on a missing run, no records or an unknown id."""
    path = Path(ref).expanduser()
    if path.exists():
        return load_dir(ref, path)
    if MLFLOW_ID.match(ref):
        return load_mlflow(ref, tracking_uri or DEFAULT_TRACKING_URI)
    raise UserError(f"no such run directory or MLflow run id: {ref}")


def questions(run: RunSource, case_ids: set[str]) -> dict[str, str]:
    """The question of each case, from the dataset the run used ({} when it is gone); a
    conversation's turn ``CONV.tK``: that turn's question."""
    path = run.dataset_cases()
    if path is None or not path.is_file():
        return {}
    import json

    from raglab.data.conversation import turn_id

    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(obj, dict):
                    continue
                if isinstance(obj.get("turns"), list) and isinstance(obj.get("id"), str):
                    for k, turn in enumerate(obj["turns"], start=1):
                        if turn_id(obj["id"], k) in case_ids and isinstance(turn, dict):
                            out[turn_id(obj["id"], k)] = str(turn.get("question", ""))
                elif obj.get("id") in case_ids:
                    out[obj["id"]] = str(obj.get("question", ""))
    except (OSError, UnicodeDecodeError):
        return out
    return out


def safe_name(text: str) -> str:
    """A label made safe for a directory name."""
    return re.sub(r"[^A-Za-z0-9._=,+-]+", "_", text).strip("._") or "run"
