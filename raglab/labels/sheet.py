"""The labelling file: one JSON Lines row per sampled case and metric, and reading a filled
one back (``raglab label RUN --from FILE``).

A row holds what a person needs to judge the case's value of the metric, and nothing of the
judge's verdict: ``case_id``, ``metric``, ``label`` (null until labelled), ``ask`` (the
question to answer), ``scale``, the case's ``question`` and ``reference`` answer, the
``answer`` and its ``context`` passages, for the faithfulness family the answer's
``claims`` (as the grader split them), for the nugget family the case's ``nuggets``, for a
conversation's turn its ``history`` (the messages its system was given before it), the
case's ``stratum``, and the ``answer_sha256`` and ``metric_version`` the label will be
stored under. Rows come in the sample's random order, so a file labelled from the top
down is a random sample at every point.

A filled file is read strictly: a row needs ``case_id``, ``metric`` and ``label`` (null or
empty: not labelled, left out); the case must be in the run's sample and the metric must
apply to it. A row without ``answer_sha256``/``metric_version`` (a file made elsewhere) is
taken as a label of the run's current answer and metric version. A ``.csv`` file with the
same column names is read the same way.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from raglab.data.io import iter_json_lines, object_id, read_run_config
from raglab.errors import UserError
from raglab.labels.sample import case_key
from raglab.labels.store import (
    CaseState,
    SampleDesign,
    StoredLabel,
    answer_sha256,
    labelled_spec,
    metric_version,
    now,
    read_label,
    stratum,
)

#: the question a person answers for each judged metric (others: the metric's meaning)
ASK = {
    "faithfulness": "Is every claim of the answer supported by the context passages? "
                    "(yes: all, partial: some, no: none)",
    "contradicted_claim_rate": "Do the context passages contradict the answer's claims? "
                               "(yes: all, partial: some, no: none)",
    "correctness": "Does the answer state what the reference answer says? "
                   "(yes: all of it, partial: some, no: none)",
    "citation_precision": "Do the passages the answer cites support the sentences citing "
                          "them? (yes: all, partial: some, no: none)",
    "relevance": "Does the answer answer the question as asked? (yes; partial: it adds "
                 "unneeded material; no: it answers another question or refuses)",
    "vital_nugget_recall": "Does the answer state the vital nuggets? (yes: all, partial: "
                           "some or in part, no: none)",
    "nugget_recall": "Does the answer state the nuggets? (yes: all, partial: some or in "
                     "part, no: none)",
    "all_vital_present": "Does the answer state every vital nugget? (yes / no)",
    "false_refusal_rate": "Does the answer refuse, although the question is answerable? "
                          "(yes / no)",
    "false_answer_rate": "Does the answer answer, although the question is unanswerable "
                         "(it should abstain)? (yes / no)",
}
SCALE = {"share": "yes / partial / no (1 / 0.5 / 0), or a number in [0, 1]",
         "binary": "yes / no (1 / 0)"}


def _case_texts(run_dir: Path, ids: set[str]) -> dict[str, dict[str, Any]]:
    """The sampled cases as the run's cases file has them ({} when it cannot be read)."""
    from raglab.data.conversation import case_objects
    from raglab.data.dataset import resolve_path

    try:
        cfg = read_run_config(run_dir)
        path = resolve_path((cfg.get("dataset") or {})["cases"])
        return case_objects(path, ids, history=True)
    except (OSError, KeyError, TypeError, AttributeError, UserError):
        return {}


def _claims(record: dict[str, Any]) -> list[str]:
    for v in record.get("verdicts") or []:
        if isinstance(v, dict) and v.get("family") == "faithfulness" \
                and v.get("kind") == "decomposition" and isinstance(v.get("claims"), list):
            return [str(c) for c in v["claims"]]
    return []


def sheet_rows(run_dir: Path, design: SampleDesign, metrics: list[str],
               versions: dict[str, Any], labelled: dict[tuple[str, str, str, str], float]
               ) -> list[dict[str, Any]]:
    """The labelling file's rows for the sampled cases where each metric applies, in the
    sample's order; ``labelled`` (a stored label's key -> value) fills the labels made."""
    from raglab.data.record import RecordLines

    wanted = design.sampled_ids()
    records: dict[str, dict[str, Any]] = {}
    for _, _, rec in RecordLines(run_dir / "records.jsonl"):
        if rec.get("case_id") in wanted:
            records[rec["case_id"]] = rec
    cases = _case_texts(run_dir, wanted)
    rows = []
    for cid in sorted(wanted & set(records), key=lambda c: case_key(design.seed, c)):
        rec, case = records[cid], cases.get(cid, {})
        output = rec.get("output") or {}
        sha = answer_sha256(output)
        for metric in metrics:
            spec = labelled_spec(metric)
            if sha is None or (rec.get("metrics") or {}).get(metric) is None:
                continue  # no answer, or the metric does not apply to this case
            version = metric_version(versions, spec)
            row: dict[str, Any] = {
                "case_id": cid, "metric": metric,
                "label": labelled.get((cid, metric, sha, version)),
                "ask": ASK.get(metric, spec.meaning), "scale": SCALE[spec.kind],
                "question": case.get("question"), "reference": case.get("reference_answer"),
                "answer": output.get("answer"),
                "context": [{"doc_id": p.get("doc_id"), "text": p.get("text")}
                            for p in output.get("context") or [] if isinstance(p, dict)]}
            conv = rec.get("conversation")
            if isinstance(conv, dict):  # a turn: the messages its system was given before it
                row["history"] = conv.get("messages") if conv.get("messages") is not None \
                    else case.get("history")
            if spec.family == "faithfulness":
                row["claims"] = _claims(rec)
            if spec.family == "nuggets":
                row["nuggets"] = [{"text": x.get("text"), "vital": bool(x.get("vital"))}
                                  for x in case.get("nuggets") or [] if isinstance(x, dict)]
            row.update(stratum=stratum(rec.get("tags"), design.by), answer_sha256=sha,
                       metric_version=version)
            rows.append(row)
    return rows


def _csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        fh = open(path, encoding="utf-8-sig", newline="")
    except OSError as e:
        raise UserError(f"cannot open labels file: {e.strerror}", file=str(path)) from None
    with fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or "case_id" not in reader.fieldnames:
            raise UserError("a CSV labels file needs a header row with case_id, metric and "
                            "label", file=str(path), line=1)
        try:
            for row in reader:
                yield reader.line_num, {k: (v if v != "" else None) for k, v in row.items()
                                        if k is not None}
        except (csv.Error, UnicodeDecodeError) as e:
            raise UserError(f"not a CSV file ({e})", file=str(path),
                            line=reader.line_num) from None


def read_filled(path: Path, design: SampleDesign, cases: dict[str, CaseState],
                versions: dict[str, Any], source: str) -> tuple[list[StoredLabel], int, int]:
    """The labels of a filled file: ``(labels, rows not labelled, labels taken as of the
    current answer)``; UserError (file, line, case id) on the first bad row."""
    from raglab.data.io import check_readable_file

    check_readable_file(path, "labels file")
    rows = _csv_rows(path) if path.suffix.lower() == ".csv" \
        else iter_json_lines(path, "labels file")
    in_sample = design.sampled_ids()
    out: dict[tuple[str, str], tuple[int, StoredLabel]] = {}
    blank = assumed = 0
    at = now()
    for lineno, obj in rows:
        cid = object_id(obj)

        def bad(msg: str, line: int = lineno, case: str | None = cid) -> UserError:
            return UserError(msg, file=str(path), line=line, case_id=case)

        if not isinstance(obj.get("case_id"), str) or not obj["case_id"]:
            raise bad("a row without a case_id")
        metric, spec, value = read_label(obj, bad, "a row")
        if value is None:
            blank += 1
            continue
        case = cases.get(cid or "")
        if case is None:
            raise bad("no such case in the run")
        if cid not in in_sample:
            raise bad("not in the run's sample (labels outside the random sample would bias "
                      "the estimate)")
        if case.metrics.get(metric) is None or case.answer_sha256 is None:
            raise bad(f"{metric} does not apply to this case (the run has no value for it)")
        sha, version = obj.get("answer_sha256"), obj.get("metric_version")
        if sha is None and version is None:
            sha, version = case.answer_sha256, metric_version(versions, spec)
            assumed += 1
        if not isinstance(sha, str) or not isinstance(version, str) or not version:
            raise bad("answer_sha256 and metric_version go together (both, or neither)")
        label = StoredLabel(cid or "", metric, value, sha.lower(), version, at, source)
        first = out.get((label.case_id, metric))
        if first is not None and first[1].label != value:
            raise bad(f"labelled twice, differently (line {first[0]} says "
                      f"{first[1].label:g}, this line {value:g})")
        out[(label.case_id, metric)] = (lineno, label)
    return [lab for _, lab in out.values()], blank, assumed
