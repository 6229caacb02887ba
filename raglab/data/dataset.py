"""Loading a dataset (corpus + cases [+ human labels]) and validating it.

Validation: schema, duplicate ids, every evidence item located in its document (exact after
normalisation, else fuzzy), spans in range. A case whose evidence is gone is quarantined
(excluded from runs, with the reason); softer problems are warnings.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from raglab.data.conversation import flatten, is_conversation, parse_case
from raglab.data.io import iter_json_lines, read_models
from raglab.data.schema import Case, Document, HumanLabel, matches_filters, may_see
from raglab.errors import UserError
from raglab.secrets import clip
from raglab.text.normalize import Location, fact_changes, locate_quote, natural_key

PKG_PREFIX = "pkg://"


def resolve_path(path: str | Path) -> Path:
    """Resolve ``pkg://raglab/datasets/...`` to the installed package data; else a plain path."""
    s = str(path)
    if not s.strip():
        raise UserError("empty path given for a dataset file (dataset.corpus, dataset.cases, "
                        "dataset.labels or system.path)")
    if s.startswith(PKG_PREFIX):
        package, _, rel = s[len(PKG_PREFIX):].partition("/")
        return Path(str(resources.files(package).joinpath(rel)))
    return Path(s).expanduser()


def data_name(name: str, corpus: str, cases: str) -> tuple[str, bool]:
    """The dataset's name, and whether it was given here rather than by the config. Data
    that is not a shipped set's is never called by its name: the name of a shipped set
    (``raglab/datasets/NAME``) whose corpus or cases are other files (``dataset.cases=...``
    overriding the demo's) becomes the cases file's base name (``faq`` for
    ``data/faq.jsonl``; ``custom`` when that is a shipped set's name too)."""
    shipped = f"pkg://raglab/datasets/{name}/"
    if not is_shipped_set(name) or (str(corpus).startswith(shipped)
                                 and str(cases).startswith(shipped)):
        return name, False
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(str(cases)).name.split(".")[0]).strip("-.")
    return (stem if stem and not is_shipped_set(stem) else "custom"), True


def is_shipped_set(name: str) -> bool:
    return bool(name) and "/" not in name and name not in (".", "..") and \
        resources.files("raglab").joinpath("datasets", name).is_dir()


def dataset_identity(name: str, corpus: str, cases: str) -> dict[str, str]:
    """What a record says about the data it used: its name (:func:`data_name`) and both
    paths as configured."""
    return {"name": data_name(name, corpus, cases)[0], "corpus": str(corpus),
            "cases": str(cases)}


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class Quarantined:
    """A case excluded from runs. ``kind``: ``missing_document``, ``span_out_of_range``,
    ``quote_not_found`` or ``changed_fact`` (a fuzzy match whose numbers, negations or
    named entities differ from the quote; ``quote`` and ``matched`` hold both texts)."""

    case_id: str
    file: str
    line: int
    reason: str
    kind: str = ""
    quote: str | None = None
    matched: str | None = None

    def as_dict(self) -> dict:
        out = {"case_id": self.case_id, "file": self.file, "line": self.line,
               "reason": self.reason, "kind": self.kind}
        if self.quote is not None:
            out.update(quote=self.quote, matched=self.matched)
        return out

    def render(self) -> str:
        return f"{self.file}:{self.line} case {self.case_id}: quarantined: {self.reason}"


@dataclass(frozen=True)
class _Problem:
    kind: str
    reason: str
    quote: str | None = None
    matched: str | None = None


@dataclass
class Dataset:
    corpus_path: Path
    cases_path: Path
    corpus: dict[str, Document]
    cases: list[Case]  # usable cases only (quarantined ones removed)
    locations: dict[str, list[Location]]  # per usable case, one per evidence item
    quarantined: list[Quarantined] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    corpus_hash: str = ""
    cases_hash: str = ""
    labels: list[HumanLabel] = field(default_factory=list)
    labels_path: Path | None = None
    n_cases_total: int = 0

    @property
    def usable(self) -> bool:
        return bool(self.cases)

    @functools.cached_property
    def restricted(self) -> frozenset[str]:
        """The documents with an access list (the only ones a user may be refused)."""
        return frozenset(d for d, doc in self.corpus.items() if doc.acl is not None)

    @functools.cached_property
    def doc_lengths(self) -> dict[str, int]:
        """Each document's length in characters (the bound of a hit's span)."""
        return {d: len(doc.text) for d, doc in self.corpus.items()}


def load_corpus(path: Path) -> dict[str, Document]:
    corpus: dict[str, Document] = {}
    first_line: dict[str, int] = {}
    for lineno, doc in read_models(path, Document, "corpus"):
        if doc.doc_id in corpus:
            raise UserError(f"duplicate doc_id (first on line {first_line[doc.doc_id]})",
                            file=str(path), line=lineno, case_id=doc.doc_id)
        corpus[doc.doc_id] = doc
        first_line[doc.doc_id] = lineno
    return corpus


def load_cases(path: Path) -> tuple[list[Case], dict[str, int]]:
    """The cases of a file, a conversation's turns each a case (raglab.data.conversation),
    and the line each came from."""
    cases: list[Case] = []
    lines: dict[str, int] = {}
    for lineno, obj in iter_json_lines(path, "cases file"):
        if is_conversation(obj):
            read = flatten(obj, file=str(path), line=lineno)
        else:
            read = [parse_case(obj, file=str(path), line=lineno)]
        for case in read:
            if case.id in lines:
                raise UserError(f"duplicate case id (first on line {lines[case.id]})",
                                file=str(path), line=lineno, case_id=case.id)
            lines[case.id] = lineno
            cases.append(case)
    return cases, lines


def load_labels(path: Path) -> list[HumanLabel]:
    return [label for _, label in read_models(path, HumanLabel, "labels file")]


def _locate_case(case: Case, corpus: dict[str, Document],
                 threshold: float) -> tuple[list[Location], _Problem | None]:
    found: list[Location] = []
    for i, ev in enumerate(case.evidence):
        doc = corpus.get(ev.doc_id)
        if doc is None:
            return [], _Problem("missing_document",
                                f"evidence {i}: document '{ev.doc_id}' is not in the corpus")
        if ev.start is not None and ev.end is not None:
            if ev.end > len(doc.text):
                return [], _Problem("span_out_of_range", (
                    f"evidence {i}: span {ev.start}-{ev.end} is outside document "
                    f"'{ev.doc_id}' ({len(doc.text)} characters)"))
            found.append(Location(ev.start, ev.end, "span", 100.0))
            continue
        loc = locate_quote(ev.quote or "", doc.text, threshold)
        if loc is None:
            return [], _Problem("quote_not_found", (
                f"evidence {i}: quote not found in document '{ev.doc_id}' "
                f"(exact or fuzzy >= {threshold:g}): {clip(ev.quote or '', 60)!r}"))
        if loc.method == "fuzzy":
            changes = fact_changes(ev.quote or "", doc.text[loc.start:loc.end])
            matched = " ".join(doc.text[loc.start:loc.end].replace("\u00ad", "").split())
            if changes:
                quote = " ".join((ev.quote or "").split())
                return [], _Problem("changed_fact", (
                    f"changed_fact: evidence {i} in document '{ev.doc_id}' matches only with "
                    f"a changed fact ({'; '.join(changes)}): quote {quote!r}; document "
                    f"now says {matched!r}"), quote, matched)
        found.append(loc)
    return found, None


def _case_warnings(case: Case, corpus: dict[str, Document]) -> list[str]:
    out: list[str] = []
    if case.answerable:
        if not any(n.vital for n in case.nuggets):
            out.append("answerable case has no vital nugget")
        for ev in case.evidence:
            doc = corpus[ev.doc_id]
            if not matches_filters(doc.metadata, case.filters):
                out.append(f"evidence document '{ev.doc_id}' never passes the case's filters")
            if not may_see(doc.acl, case.user):
                out.append(f"evidence document '{ev.doc_id}' is not visible to the case's user")
    else:
        if case.nuggets:
            out.append("unanswerable case has nuggets")
        for ev in case.evidence:
            if may_see(corpus[ev.doc_id].acl, case.user):
                out.append(f"unanswerable case has evidence in '{ev.doc_id}', "
                           "which its user may see")
    return out


def load_dataset(corpus: str | Path, cases: str | Path, labels: str | Path | None = None,
                 fuzzy_threshold: float = 90.0) -> Dataset:
    """Load and validate a dataset. Raises UserError on schema errors; quarantines the rest."""
    return _load_dataset(corpus, cases, labels, fuzzy_threshold)


def _load_dataset(corpus: str | Path, cases: str | Path, labels: str | Path | None,
                  fuzzy_threshold: float) -> Dataset:
    corpus_path, cases_path = resolve_path(corpus), resolve_path(cases)
    docs = load_corpus(corpus_path)
    all_cases, lines = load_cases(cases_path)
    usable: list[Case] = []
    locations: dict[str, list[Location]] = {}
    quarantined: list[Quarantined] = []
    warnings: list[str] = []
    for case in all_cases:
        locs, problem = _locate_case(case, docs, fuzzy_threshold)
        if problem is not None:
            quarantined.append(Quarantined(case.id, str(cases_path), lines[case.id],
                                           problem.reason, problem.kind, problem.quote,
                                           problem.matched))
            continue
        usable.append(case)
        locations[case.id] = locs
        for w in _case_warnings(case, docs):
            warnings.append(f"{cases_path}:{lines[case.id]} case {case.id}: warning: {w}")
    ds = Dataset(corpus_path, cases_path, docs, usable, locations, quarantined, warnings,
                 corpus_hash=file_sha256(corpus_path), cases_hash=file_sha256(cases_path),
                 n_cases_total=len(all_cases))
    if labels:
        ds.labels_path = resolve_path(labels)
        ds.labels = load_labels(ds.labels_path)
        known = {c.id for c in all_cases}
        for label in ds.labels:
            if label.case_id not in known:
                warnings.append(f"{ds.labels_path}: warning: label for unknown case "
                                f"{label.case_id}")
    return ds


def summary_rows(ds: Dataset) -> list[tuple[str, str, int]]:
    """(group, value, count) rows: by tag, answerability and evidence count. The tag
    ``conversation`` names the unit, not a slice (docs/conversations.md): one row, its
    number of values; the numbers in a value in their order (turn 2 before turn 10)."""
    rows: list[tuple[str, str, int]] = []
    by_tag: dict[str, Counter] = defaultdict(Counter)
    for case in ds.cases:
        for k, v in case.tags.items():
            by_tag[k][v] += 1
    for k in sorted(by_tag):
        if k == "conversation":
            rows.append(("tag:conversation", f"{len(by_tag[k])} conversations",
                         sum(by_tag[k].values())))
            continue
        for v, n in sorted(by_tag[k].items(), key=lambda vn: (natural_key(vn[0]), vn[0])):
            rows.append((f"tag:{k}", v, n))
    ans = Counter("answerable" if c.answerable else "unanswerable" for c in ds.cases)
    rows += [("answerability", k, n) for k, n in sorted(ans.items())]
    evc = Counter(min(len(c.evidence), 3) for c in ds.cases)
    rows += [("evidence items", "3+" if k == 3 else str(k), n) for k, n in sorted(evc.items())]
    return rows
