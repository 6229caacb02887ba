"""Human labels stored with a run, and the loader every estimate reads them through.

A run directory's ``labels/`` holds two files:

- ``sample.json``: the sample design (:class:`SampleDesign`: seed, stratifying tag, the
  cases of each stratum in the run, the sampled case ids of each stratum, the sha256 of the
  sorted case ids the sample was drawn from), plus what it was drawn for (``n``,
  ``metrics``, ``inclusion_probability`` of each stratum).
- ``labels.jsonl``: one line per stored label, ``{"case_id", "metric", "label",
  "answer_sha256", "metric_version", "at", "source"}``; ``label`` is on the metric's scale
  (a number in [0, 1]; 0 or 1 for a pass/fail metric). A label is keyed by case, metric,
  answer hash and metric version: a new label of the same key replaces the old one, a label
  made for another answer or another version of the judge is kept but never used (stale).

A label is usable when its ``answer_sha256`` equals :func:`answer_sha256` of the case's
current output, its ``metric_version`` equals the run's version of the metric's family
(``metrics.json``), its case is in the sample and the metric applies to the case (its value
in ``records.jsonl`` is not null: the judge scored it, so the label can be paired).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from raglab.data.io import atomic_write_json, iter_json_lines, read_run_metrics, write_jsonl
from raglab.errors import UserError
from raglab.metrics.aggregate import slice_keys
from raglab.metrics.catalog import MetricSpec, spec_of

LABELS_DIR = "labels"
SAMPLE_FILE = "sample.json"
LABELS_FILE = "labels.jsonl"
#: the stratum of a case that lacks the stratifying tag
NO_TAG = "(none)"
#: words a person (or a spreadsheet) may write for a label, and their value
WORDS = {"yes": 1.0, "y": 1.0, "true": 1.0, "partial": 0.5, "p": 0.5, "no": 0.0, "n": 0.0,
         "false": 0.0}
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class SampleDesign:
    seed: int
    by: str | None                 # tag key of a stratified sample, else None
    population: dict[str, int]     # stratum -> cases in the run (one key "all" when unstratified)
    sampled: dict[str, list[str]]  # stratum -> sampled case ids
    case_set_sha256: str           # of the sorted case ids the sample was drawn from

    def sampled_ids(self) -> set[str]:
        return {c for ids in self.sampled.values() for c in ids}


@dataclass(frozen=True)
class LabelSet:
    metric: str
    metric_version: str
    values: dict[str, float]       # case id -> human label on the metric's scale (usable only)
    stratum_of: dict[str, str]     # case id -> stratum, for EVERY case of the run
    design: SampleDesign
    stale: int                     # labels not used: answer hash or metric version changed
    missing: int                   # sampled cases without a label yet


@dataclass(frozen=True)
class StoredLabel:
    case_id: str
    metric: str
    label: float
    answer_sha256: str
    metric_version: str
    at: str = ""
    source: str = ""

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.case_id, self.metric, self.answer_sha256, self.metric_version)

    def to_json(self) -> dict[str, Any]:
        return {"case_id": self.case_id, "metric": self.metric, "label": self.label,
                "answer_sha256": self.answer_sha256, "metric_version": self.metric_version,
                "at": self.at, "source": self.source}


@dataclass(frozen=True)
class CaseState:
    """What a label is checked against: one case of the run as its record has it now."""

    case_id: str
    tags: dict[str, Any]
    answer_sha256: str | None      # None: no output (the system failed on the case)
    metrics: dict[str, Any]        # the record's per-case metric values
    slices: dict[str, str]         # tag key -> value, as metrics.json slices the run


def labels_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / LABELS_DIR


def answer_sha256(output: dict[str, Any] | None) -> str | None:
    """The hash of an answer as a person judges it: the answer's text and the texts of the
    context passages it was given (a faithfulness label says nothing of other passages).
    None when there is no answer (the system failed)."""
    if not isinstance(output, dict) or not isinstance(output.get("answer"), str):
        return None
    context = [p.get("text") if isinstance(p, dict) else None
               for p in output.get("context") or []]
    text = json.dumps({"answer": output["answer"], "context": context}, ensure_ascii=False,
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def case_set_sha256(case_ids: list[str] | set[str]) -> str:
    return hashlib.sha256("\n".join(sorted(case_ids)).encode("utf-8")).hexdigest()


def stratum(tags: dict[str, Any] | None, by: str | None) -> str:
    """The stratum of a case: the value of its tag ``by`` (``"all"`` when unstratified)."""
    if by is None:
        return "all"
    value = (tags or {}).get(by)
    if value is None or value == "":
        return NO_TAG
    return value if isinstance(value, str) else json.dumps(value)


def labelled_spec(metric: str) -> MetricSpec:
    """The declaration of a metric people can label: one a grader judges, per case, on a
    0-1 scale; UserError (one line) for any other name."""
    spec = spec_of(metric)
    if spec is None:
        raise UserError(f"unknown metric {metric!r}")
    if spec.judged is None or spec.family is None or spec.kind not in ("share", "binary") \
            or "run" not in spec.reported_by:
        raise UserError(f"metric {metric!r} is not judged by a grader (labels correct judged "
                        "metrics only: faithfulness, correctness, relevance, nugget recall...)")
    return spec


def read_label(obj: dict, bad: Callable[[str], UserError], what: str
               ) -> tuple[str, MetricSpec, float | None]:
    """``(metric, its spec, the label's value or None)`` of a row (``what``: "a row", "a
    label", for the message); ``bad(message)`` makes the error naming its file and line."""
    metric = obj.get("metric")
    if not isinstance(metric, str) or not metric:
        raise bad(f"{what} without a metric")
    try:
        spec = labelled_spec(metric)
        return metric, spec, label_value(obj.get("label"), spec)
    except (UserError, ValueError) as e:
        raise bad(getattr(e, "message", None) or str(e)) from None


def label_value(raw: Any, spec: MetricSpec) -> float | None:
    """A label as written (``1``/``0``, a number in [0, 1], ``yes``/``partial``/``no``,
    ``true``/``false``, or null for not yet labelled) on the metric's scale; ValueError
    with the reason for anything else. A pass/fail metric takes 0 or 1 only."""
    if raw is None:
        return None
    if isinstance(raw, bool):
        value = 1.0 if raw else 0.0
    elif isinstance(raw, int) and not 0 <= raw <= 1:  # (a huge one has no float)
        raise ValueError(f"label {_shown(raw)} is outside [0, 1]")
    elif isinstance(raw, int | float):
        value = float(raw)
    elif isinstance(raw, str):
        word = raw.strip().lower()
        if word == "":
            return None
        if word in WORDS:
            value = WORDS[word]
        else:
            try:
                value = float(word)
            except ValueError:
                raise ValueError(f"label {_shown(raw)} is not 1/0, a number in [0, 1] or "
                                 "yes/partial/no") from None
    else:
        raise ValueError(f"label {json.dumps(raw)[:60]} is not 1/0, a number in [0, 1] or "
                         "yes/partial/no")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"label {_shown(raw)} is outside [0, 1]")
    if spec.kind == "binary" and value not in (0.0, 1.0):
        raise ValueError(f"label {_shown(raw)}: {spec.name} is pass/fail, label it 1/0 or "
                         "yes/no")
    return value


def _shown(raw: Any) -> str:
    """A label as written, for a message: its repr, cut to 60 characters (a number of
    400 digits is named by its length)."""
    if isinstance(raw, int) and not isinstance(raw, bool) and abs(raw) >= 10 ** 20:
        return f"(a {'negative ' if raw < 0 else ''}number of {len(str(abs(raw)))} digits)"
    text = repr(raw)
    return text if len(text) <= 60 else text[:57] + "..."


# -- the sample --------------------------------------------------------------------------
def read_sample(run_dir: str | Path) -> tuple[SampleDesign, dict[str, Any]] | None:
    """The run's sample design and the whole ``sample.json`` (None: no sample drawn)."""
    path = labels_dir(run_dir) / SAMPLE_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        design = SampleDesign(
            seed=int(data["seed"]), by=data.get("by"),
            population={str(k): int(v) for k, v in data["population"].items()},
            sampled={str(k): [str(c) for c in v] for k, v in data["sampled"].items()},
            case_set_sha256=str(data["case_set_sha256"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise UserError(f"not a sample design ({type(e).__name__}: {e}); draw the sample "
                        "again with raglab label RUN --n N --metrics M", file=str(path)) from None
    if design.by is not None and not isinstance(design.by, str):
        raise UserError("not a sample design (by is not a tag key)", file=str(path))
    return design, data


def write_sample(run_dir: str | Path, design: SampleDesign, extra: dict[str, Any]) -> Path:
    path = labels_dir(run_dir) / SAMPLE_FILE
    atomic_write_json(path, {"seed": design.seed, "by": design.by,
                             "population": design.population, "sampled": design.sampled,
                             "case_set_sha256": design.case_set_sha256, **extra})
    return path


# -- the stored labels -------------------------------------------------------------------
def read_stored(run_dir: str | Path) -> list[StoredLabel]:
    """Every label stored with the run ([] when none); UserError naming file, line and case
    id on the first bad line."""
    path = labels_dir(run_dir) / LABELS_FILE
    if not path.exists():
        return []
    if path.stat().st_size == 0:
        return []
    out = []
    for lineno, obj in iter_json_lines(path, "labels file"):
        out.append(_stored(obj, str(path), lineno))
    return out


def _stored(obj: dict[str, Any], file: str, line: int) -> StoredLabel:
    cid = obj.get("case_id")
    if not isinstance(cid, str) or not cid:
        raise UserError("a label without a case_id", file=file, line=line)

    def bad(msg: str) -> UserError:
        return UserError(msg, file=file, line=line, case_id=cid)

    metric, spec, value = read_label(obj, bad, "a label")
    if value is None:
        raise bad("a stored label without a value")
    sha, version = obj.get("answer_sha256"), obj.get("metric_version")
    if not isinstance(sha, str) or not _HEX64.match(sha):
        raise bad("answer_sha256 is not a sha256 (64 hex digits)")
    if not isinstance(version, str) or not version:
        raise bad("a label without a metric_version")
    return StoredLabel(cid, metric, value, sha, version, str(obj.get("at") or ""),
                       str(obj.get("source") or ""))


def store_labels(run_dir: str | Path, new: list[StoredLabel]) -> tuple[int, int]:
    """Add ``new`` labels to the run's store (a label of the same key replaces the old one),
    rewriting ``labels.jsonl`` atomically, under a lock (two writers never lose each
    other's labels); ``(added, replaced)``."""
    import fcntl
    import os

    from raglab.errors import storage_error

    folder = labels_dir(run_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / ".labels.lock", os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise storage_error(e, "the labels", folder) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return _store(run_dir, new)
    finally:
        os.close(fd)


def _store(run_dir: str | Path, new: list[StoredLabel]) -> tuple[int, int]:
    existing = read_stored(run_dir)
    index = {lab.key: i for i, lab in enumerate(existing)}
    added = replaced = 0
    for lab in new:
        if lab.key in index:
            if existing[index[lab.key]].label != lab.label:
                replaced += 1
            existing[index[lab.key]] = lab
        else:
            index[lab.key] = len(existing)
            existing.append(lab)
            added += 1
    if added or replaced or not (labels_dir(run_dir) / LABELS_FILE).exists():
        write_jsonl(labels_dir(run_dir) / LABELS_FILE, [lab.to_json() for lab in existing])
    return added, replaced


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# -- the run as it is now ----------------------------------------------------------------
def run_cases(run_dir: str | Path) -> dict[str, CaseState]:
    """Every case of the run (the last record of a case id wins), from ``records.jsonl``."""
    from raglab.data.record import RecordLines

    path = Path(run_dir) / "records.jsonl"
    if not path.is_file():
        raise UserError(f"{run_dir}: not a run directory (records.jsonl is missing)")
    out: dict[str, CaseState] = {}
    for lineno, _, rec in RecordLines(path):
        cid = rec.get("case_id")
        if not isinstance(cid, str):
            raise UserError("a record without a case_id", file=str(path), line=lineno)
        tags, metrics = rec.get("tags"), rec.get("metrics")
        tags = tags if isinstance(tags, dict) else {}
        metrics = metrics if isinstance(metrics, dict) else {}
        try:
            slices = slice_keys(rec)
        except (KeyError, TypeError, AttributeError):  # a record without its gold summary
            slices = {str(k): str(v) for k, v in tags.items()}
        out[cid] = CaseState(cid, tags, answer_sha256(rec.get("output")), metrics, slices)
    return out


def metric_version(versions: dict[str, Any], spec: MetricSpec) -> str:
    version = versions.get(spec.family or "")
    if not isinstance(version, str) or not version:
        raise UserError(f"the run has no version for the {spec.family} family (metrics.json "
                        "metric_versions): was it run with a grader?")
    return version


def usable_labels(run_dir: Path, metric: str) -> LabelSet | None:
    """The usable human labels of ``metric`` in the run (None when the run has no labels for
    the metric), with the sample design and every case's stratum; reads ``records.jsonl``
    for the current answers and ``metrics.json`` for the metric versions. UserError (file,
    line, case id) on a bad labels file.

    ``values`` holds only cases whose value of the metric is not null in the records, so
    the judge's scores to pair them with (``judge_all`` of a stratum) are the non-null values
    of the stratum's cases; ``design.population`` counts every case of the run."""
    run_dir = Path(run_dir)
    stored = [lab for lab in read_stored(run_dir) if lab.metric == metric]
    if not stored:
        return None
    spec = labelled_spec(metric)
    sample = read_sample(run_dir)
    if sample is None:
        raise UserError(f"labels of {metric} but no sample design ({LABELS_DIR}/{SAMPLE_FILE} "
                        "is missing); draw the sample with raglab label RUN --n N --metrics "
                        f"{metric}", file=str(labels_dir(run_dir) / LABELS_FILE))
    design = sample[0]
    version = metric_version(read_run_metrics(run_dir).get("metric_versions") or {}, spec)
    cases = run_cases(run_dir)
    in_sample = design.sampled_ids()
    values: dict[str, float] = {}
    had_label: set[str] = set()
    for lab in stored:  # later lines are newer: they win
        case = cases.get(lab.case_id)
        if case is None or lab.case_id not in in_sample:
            continue
        had_label.add(lab.case_id)
        if lab.answer_sha256 == case.answer_sha256 and lab.metric_version == version \
                and case.metrics.get(metric) is not None:
            values[lab.case_id] = lab.label
    applies = {c for c in in_sample if c in cases and cases[c].metrics.get(metric) is not None}
    stale = len(had_label - set(values))
    missing = len(applies - had_label)
    return LabelSet(metric=metric, metric_version=version, values=values,
                    stratum_of={cid: stratum(c.tags, design.by) for cid, c in cases.items()},
                    design=design, stale=stale, missing=missing)
