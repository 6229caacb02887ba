"""`raglab validate`: the demo validates; every bad input gives one clear line and exit != 0."""

import json
import random

import pytest

from raglab.data.dataset import load_dataset
from raglab.text.normalize import normalize
from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl


def _assert_one_line_error(proc, *needles):
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_demo_validates_clean(tmp_path):
    proc = run_cli("validate", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "0 quarantined" in proc.stdout
    assert (tmp_path / "quarantine.jsonl").read_text() == ""


def test_demo_meets_the_benchmark_quotas():
    ds = load_dataset("pkg://raglab/datasets/demo/corpus.jsonl",
                      "pkg://raglab/datasets/demo/cases.jsonl",
                      "pkg://raglab/datasets/demo/labels.jsonl")
    cases = ds.cases
    assert len(ds.corpus) >= 60 and len(cases) >= 150 and not ds.quarantined
    assert len({d.metadata.get("product") for d in ds.corpus.values()}) >= 4
    assert sum(d.acl is not None for d in ds.corpus.values()) >= 6
    assert sum(not c.answerable for c in cases) >= 0.2 * len(cases)
    assert sum(len({e.doc_id for e in c.evidence}) >= 2 for c in cases) >= 0.15 * len(cases)
    assert sum(c.user is not None and any(ds.corpus[e.doc_id].acl for e in c.evidence)
               or (c.user is not None and not c.answerable) for c in cases) >= 10
    assert sum(bool(c.must_not_contain) for c in cases) >= 5
    for key in ("intent", "source", "difficulty", "query_type"):
        assert all(key in c.tags for c in cases), key
    assert {c.tags["query_type"] for c in cases} >= {"lookup", "comparison", "aggregation",
                                                      "explanation"}
    labels = ds.labels
    assert len(labels) >= 150
    assert {lab.label for lab in labels if lab.kind == "claim"} == {"SUPPORTED", "CONTRADICTED",
                                                                    "NOT_FOUND"}
    assert {lab.label for lab in labels if lab.kind == "nugget"} == {"YES", "PARTIAL", "NO"}


def _tiny(tmp_path, corpus=None, cases=None):
    c = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS if corpus is None else corpus)
    k = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES if cases is None else cases)
    return c, k


def _validate(tmp_path, corpus, cases):
    return run_cli("validate", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                   "dataset.labels=null", cwd=tmp_path)


def test_tiny_validates(tmp_path):
    c, k = _tiny(tmp_path)
    proc = _validate(tmp_path, c, k)
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_malformed_json_line(tmp_path):
    c, k = _tiny(tmp_path)
    lines = k.read_text().splitlines()
    lines[1] = lines[1][:-5]
    k.write_text("\n".join(lines) + "\n")
    _assert_one_line_error(_validate(tmp_path, c, k), f"{k}:2", "malformed JSON")


@pytest.mark.parametrize("mutate,needle", [
    (lambda r: r.pop("question"), "missing field 'question'"),
    (lambda r: r.update(answerable="maybe"), "field 'answerable'"),
    (lambda r: r.update(questoin="typo"), "unknown field 'questoin' (valid fields: id, question"),
    (lambda r: r["evidence"][0].update(qoute="x"),
     "unknown field 'evidence.0.qoute' (valid fields: doc_id, quote"),
])
def test_schema_errors_name_file_line_and_case(tmp_path, mutate, needle):
    cases = json.loads(json.dumps(TINY_CASES))
    mutate(cases[1])
    c, k = _tiny(tmp_path, cases=cases)
    _assert_one_line_error(_validate(tmp_path, c, k), f"{k}:2", "case t-2", needle)


def test_duplicate_case_id(tmp_path):
    cases = json.loads(json.dumps(TINY_CASES))
    cases[2]["id"] = "t-1"
    c, k = _tiny(tmp_path, cases=cases)
    _assert_one_line_error(_validate(tmp_path, c, k), f"{k}:3", "case t-1", "duplicate case id")


def test_duplicate_doc_id(tmp_path):
    corpus = json.loads(json.dumps(TINY_CORPUS))
    corpus[1]["doc_id"] = "kb/a"
    c, k = _tiny(tmp_path, corpus=corpus)
    _assert_one_line_error(_validate(tmp_path, c, k), f"{c}:2", "kb/a", "duplicate doc_id")


def test_unknown_document_and_missing_quote_are_quarantined(tmp_path):
    cases = json.loads(json.dumps(TINY_CASES))
    cases[0]["evidence"][0]["doc_id"] = "kb/nowhere"
    cases[1]["evidence"][0]["quote"] = "this sentence was never in the document at all"
    c, k = _tiny(tmp_path, cases=cases)
    proc = _validate(tmp_path, c, k)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert (f"{k}:1 case t-1: quarantined: evidence 0: document 'kb/nowhere' is not in the corpus"
            in proc.stderr)
    assert f"{k}:2 case t-2: quarantined: evidence 0: quote not found" in proc.stderr
    q = [json.loads(x) for x in (tmp_path / "quarantine.jsonl").read_text().splitlines()]
    assert [r["case_id"] for r in q] == ["t-1", "t-2"] and all(r["reason"] for r in q)


def test_empty_file(tmp_path):
    c, k = _tiny(tmp_path)
    k.write_text("")
    _assert_one_line_error(_validate(tmp_path, c, k), str(k), "empty")


def test_not_utf8(tmp_path):
    c, k = _tiny(tmp_path)
    k.write_bytes(k.read_bytes() + b'{"id": "t-9", "question": "caf\xe9"}\n')
    _assert_one_line_error(_validate(tmp_path, c, k), f"{k}:5", "not valid UTF-8")


def test_very_long_line(tmp_path):
    c, k = _tiny(tmp_path)
    with open(k, "a") as fh:
        fh.write('{"id": "t-9", "question": "' + "x" * (50 * 1024 * 1024) + '"}\n')
    _assert_one_line_error(_validate(tmp_path, c, k), f"{k}:5", "longer than")


def test_directory_given_as_file(tmp_path):
    c, _ = _tiny(tmp_path)
    _assert_one_line_error(_validate(tmp_path, c, tmp_path), str(tmp_path), "is a directory")


def test_missing_file(tmp_path):
    c, _ = _tiny(tmp_path)
    _assert_one_line_error(_validate(tmp_path, c, tmp_path / "nope.jsonl"), "nope.jsonl",
                           "not found")


def _reextract(text: str, rng: random.Random, typos: bool) -> str:
    """Simulate a new PDF/HTML extraction: whitespace, hyphenation, ligatures, soft hyphens."""
    words = text.split(" ")
    out = []
    for w in words:
        r = rng.random()
        if len(w) > 7 and w.isalpha() and r < 0.15:
            cut = len(w) // 2
            w = w[:cut] + "-\n" + w[cut:]
        elif len(w) > 6 and r < 0.25:
            w = w[:3] + "\u00ad" + w[3:]
        out.append(w.replace("fi", "ﬁ").replace("ff", "ﬀ"))
    t = ("  " if rng.random() < 0.5 else " ").join(out).replace("\n\n", "\n \n\n")
    if typos:  # OCR-like damage forces the fuzzy path
        t = t.replace(" the ", " tne ")
    return t


def test_reextracted_corpus_still_validates_with_correct_offsets(tmp_path):
    rng = random.Random(7)
    ds0 = load_dataset("pkg://raglab/datasets/demo/corpus.jsonl",
                       "pkg://raglab/datasets/demo/cases.jsonl")
    corpus = [d.model_dump(exclude_none=True) for d in ds0.corpus.values()]
    for d in corpus:
        d["text"] = _reextract(d["text"], rng, typos=True)
    c = write_jsonl(tmp_path / "corpus.jsonl", corpus)
    ds = load_dataset(c, ds0.cases_path)
    assert not ds.quarantined
    methods = {loc.method for locs in ds.locations.values() for loc in locs}
    assert {"exact", "fuzzy"} <= methods
    from rapidfuzz import fuzz
    texts = {d["doc_id"]: d["text"] for d in corpus}
    for case in ds.cases:
        for ev, loc in zip(case.evidence, ds.locations[case.id]):
            found = normalize(texts[ev.doc_id][loc.start:loc.end])
            if loc.method == "exact":
                assert found == normalize(ev.quote)
            else:
                assert fuzz.ratio(found, normalize(ev.quote)) >= 85, (case.id, found, ev.quote)
    # a deleted quote is quarantined
    first = ds.cases[0]
    ev = first.evidence[0]
    for d in corpus:
        if d["doc_id"] == ev.doc_id:
            d["text"] = "This document was rewritten and says nothing relevant any more."
    write_jsonl(c, corpus)
    ds2 = load_dataset(c, ds0.cases_path)
    assert first.id in {q.case_id for q in ds2.quarantined}
